package views_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/views"
)

// TestShowJSONIndentsAsBefore: within the bounds, the text is what
// json.Indent writes.
func TestShowJSONIndentsAsBefore(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		`{}`, `[]`, `{"a":1}`, ` { "a" : [ 1 , 2 , { "b" : null } ] , "c" : { } , "d" : [ ] } `,
		`{"s":"with \"quotes\", commas, {braces} and [brackets]: \\\\"}`, `"text"`, `12.5e3`,
		`{"nested":{"a":{"b":{"c":{"d":{"e":{"f":[1]}}}}}}}`,
	} {
		var want bytes.Buffer
		require.NoError(t, json.Indent(&want, []byte(doc), "", "  "))
		got := views.ShowJSON([]byte(doc))
		require.False(t, got.Cut)
		require.Equal(t, strings.TrimSpace(want.String()), got.Text, doc)
	}
}

// TestShowJSONBounded: nesting 9,990 deep, the document that cost 200 MB
// to indent, shows in a few times its own size, stays valid JSON when not
// cut, and a long document is cut with Cut set.
func TestShowJSONBounded(t *testing.T) {
	t.Parallel()
	deep := []byte(`{"a":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}`)
	got := views.ShowJSON(deep)
	require.LessOrEqual(t, len(got.Text), 64<<10+2*len(deep))
	require.False(t, got.Cut, "levels past the limit stay on one line")
	require.True(t, json.Valid([]byte(got.Text)))
	require.Less(t, strings.Count(got.Text, "\n"), views.PrettyMaxDepth*2+2)

	// Deep and wide: every element at the deepest level shown.
	wide := []byte(`{"a":` + strings.Repeat("[", 8) + strings.TrimSuffix(strings.Repeat("0,", 200_000), ",") + strings.Repeat("]", 8) + `}`)
	got = views.ShowJSON(wide)
	require.True(t, got.Cut)
	require.LessOrEqual(t, len(got.Text), views.PrettyMaxBytes+64)

	// Text that is not JSON, within the same bounds.
	for _, bad := range []string{strings.Repeat("{", 1<<20), strings.Repeat("}", 1<<20), `{"a": "unterminated`, "]],,::"} {
		got = views.ShowJSON([]byte(bad))
		require.LessOrEqual(t, len(got.Text), views.PrettyMaxBytes+64)
	}

	// A form gets the stored text when the indented one would be cut.
	require.Equal(t, string(wide), views.EditableJSON(wide))
	require.Equal(t, "{\n  \"a\": 1\n}", views.EditableJSON([]byte(`{"a":1}`)))
}

// BenchmarkShowJSONDeep renders the 9,990-deep payload; compare its
// bytes per operation with the document's 20 KB.
func BenchmarkShowJSONDeep(b *testing.B) {
	deep := []byte(`{"a":` + strings.Repeat("[", 9990) + strings.Repeat("]", 9990) + `}`)
	b.ReportAllocs()
	for b.Loop() {
		_ = views.ShowJSON(deep)
	}
}
