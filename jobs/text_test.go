package jobs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

func TestTruncateBytes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		n    int
		want string
	}{
		{"", 0, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc…"},
		{"ab€", 4, "ab…"}, // € is three bytes: not split
		{"ab€", 5, "ab€"},
		{"ab€x", 5, "ab€…"},
		{"€", 0, "…"},
		{"é", 1, "…"},
	} {
		require.Equal(t, tc.want, jobs.TruncateBytes(tc.s, tc.n, "…"), "%q at %d", tc.s, tc.n)
	}
	require.Equal(t, "ab (cut)", jobs.TruncateBytes("abc", 2, " (cut)"))
}

func TestControlCharacters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s          string
		hasControl bool // tab allowed
		clean      bool // tab refused, UTF-8 required
	}{
		{"plain text, é €", false, true},
		{"", false, true},
		{"a\tb", false, false},
		{"a\nb", true, false},
		{"a\rb", true, false},
		{"a\x00b", true, false},
		{"a\x1fb", true, false},
		{"a\x7fb", true, false},
		{"a\u0085b", false, true}, // C1: not a byte below 0x20
		{"a\xffb", false, false},  // not UTF-8
	} {
		require.Equal(t, tc.hasControl, jobs.HasControl(tc.s), "HasControl(%q)", tc.s)
		require.Equal(t, tc.clean, jobs.CleanText(tc.s), "CleanText(%q)", tc.s)
	}
}
