package jobs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// nested is n levels of arrays around a zero, inside an object.
func nested(n int) string {
	return `{"a":` + strings.Repeat("[", n-1) + "0" + strings.Repeat("]", n-1) + "}"
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	ok := []struct{ name, doc string }{
		{"empty object", `{}`},
		{"plain", `{"a": [1, 2.5, -3e10, true, null, "x"], "b": {"c": "d"}}`},
		{"depth at the limit", nested(jobs.MaxJSONDepth)},
		{"brackets in strings do not nest", `{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}`},
		{"surrogate pair", `{"emoji": "\ud83d\ude00"}`},
		{"upper-case surrogate pair", `{"emoji": "\uD83D\uDE00"}`},
		{"escaped backslash before u0000", `{"a": "\\u0000"}`},
		{"utf-8 text", "{\"a\": \"gr\u00fc\u00df \u4e16\u754c \U0001F600\"}"},
		{"scientific numbers", `{"avogadro": 6.02214076e23, "e": 1.602e-19, "big": 1e40}`},
		{"a long number is its own size", `{"a": ` + strings.Repeat("9", 5000) + `}`},
		{"top-level string", `"x"`},
	}
	for _, tc := range ok {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, jobs.CheckJSON("payload", []byte(tc.doc)))
		})
	}
	bad := []struct{ name, doc, want string }{
		{"not json", `{"a":`, "not valid JSON"},
		{"too deep", nested(jobs.MaxJSONDepth + 1), "nests deeper than 64"},
		{"nine thousand deep", nested(9990), "nests deeper than 64"},
		{"invalid utf-8", "{\"x\":\"\xff\"}", "not valid UTF-8"},
		{"invalid utf-8 in a key", "{\"\xfe\xff\":1}", "not valid UTF-8"},
		{"truncated utf-8", "{\"x\":\"\xe2\x82\"}", "not valid UTF-8"},
		{"encoded surrogate", "{\"x\":\"\xed\xa0\x80\"}", "not valid UTF-8"},
		{"NUL", `{"a":"x\u0000y"}`, "NUL"},
		{"NUL in a key", `{"a\u0000":1}`, "NUL"},
		{"lone high surrogate", `{"x":"\ud800"}`, "lone UTF-16 surrogate"},
		{"lone high surrogate at the end", `{"x":"a\ud800"}`, "lone UTF-16 surrogate"},
		{"high surrogate then text", `{"x":"\ud800abcdef"}`, "lone UTF-16 surrogate"},
		{"high surrogate then another high", `{"x":"\ud800\ud800"}`, "lone UTF-16 surrogate"},
		{"lone low surrogate", `{"x":"\uDC00"}`, "lone UTF-16 surrogate"},
		{"number that grows", `{"a":1e131071}`, "stored as"},
		{"number numeric cannot hold", `{"a":1e131072}`, "stored as"},
		{"tiny number", `{"a":1e-20000}`, "stored as"},
		{"many small growths each refused", `{"a":[1e300]}`, "stored as"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := jobs.CheckJSON("result", []byte(tc.doc))
			require.Error(t, err)
			var ve *jobs.ValidationError
			require.True(t, errors.As(err, &ve))
			require.Equal(t, "result", ve.Field)
			require.Contains(t, ve.Message, tc.want)
		})
	}
}

// BenchmarkCheckJSON measures the check on a payload of the common shape;
// compare with json.Valid, which every enqueue already pays.
func BenchmarkCheckJSON(b *testing.B) {
	doc := []byte(`{"to": "ada@example.com", "subject": "Your invoice", "lines": [{"description": "Widget \u00e9", "quantity": 3, "unit_cents": 1250}], "meta": {"tenant": "acme", "retry": true, "ratio": 0.25}}`)
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if err := jobs.CheckJSON("payload", doc); err != nil {
			b.Fatal(err)
		}
	}
}
