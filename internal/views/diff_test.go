package views

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func render(d []DiffLine) string {
	var b strings.Builder
	for _, l := range d {
		b.WriteByte(l.Op)
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestLineDiff(t *testing.T) {
	old := "{\n  \"a\": 1,\n  \"b\": 2,\n  \"c\": 3\n}"
	nw := "{\n  \"a\": 1,\n  \"b\": 20,\n  \"c\": 3,\n  \"d\": 4\n}"
	require.Equal(t, " {\n   \"a\": 1,\n-  \"b\": 2,\n-  \"c\": 3\n+  \"b\": 20,\n+  \"c\": 3,\n+  \"d\": 4\n }\n", render(LineDiff(old, nw)))
	require.False(t, DiffChanged(LineDiff(old, old)))
	require.True(t, DiffChanged(LineDiff(old, nw)))
	// Every old line is kept or removed and every new one kept or added,
	// in order.
	for _, tc := range [][2]string{{"", "x"}, {"x", ""}, {"a\nb\nc", "c\nb\na"}, {"a\na\nb", "a\nb\nb"}} {
		d := LineDiff(tc[0], tc[1])
		var oldBack, newBack []string
		for _, l := range d {
			if l.Op != '+' {
				oldBack = append(oldBack, l.Text)
			}
			if l.Op != '-' {
				newBack = append(newBack, l.Text)
			}
		}
		require.Equal(t, tc[0], strings.Join(oldBack, "\n"))
		require.Equal(t, tc[1], strings.Join(newBack, "\n"))
	}
}

func TestLineDiffTooLargeFallsBack(t *testing.T) {
	a := strings.Repeat("x\n", 2500)
	b := strings.Repeat("y\n", 2500)
	d := LineDiff(a, b)
	require.Len(t, d, 2501*2)
	require.Equal(t, byte('-'), d[0].Op)
	require.Equal(t, byte('+'), d[len(d)-1].Op)
}

func TestCanonicalJSON(t *testing.T) {
	require.Equal(t, CanonicalJSON([]byte(`{"to": "x", "n": 1.50}`)), CanonicalJSON([]byte(`{"n":1.50,"to":"x"}`)))
	require.Equal(t, "{\n  \"a\": \"<b>\",\n  \"n\": 1.50\n}", CanonicalJSON([]byte(`{"n":1.50,"a":"<b>"}`)))
	require.Equal(t, "not json", CanonicalJSON([]byte("not json")))
}
