package domain

import "strings"

// FirstLine returns the first line of s (errors often carry stacks).
func FirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// Truncate shortens s to n characters (not bytes), marking the cut with an
// ellipsis. It is for showing text; TruncateBytes is for storing it.
func Truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
