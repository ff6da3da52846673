package jobs

import "unicode/utf8"

// TruncateBytes cuts s to at most n bytes, without splitting a UTF-8
// sequence, and appends mark when it had to cut (so the result may exceed n
// by mark's length). s is returned as is when it fits.
func TruncateBytes(s string, n int, mark string) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// isControl reports whether c is an ASCII control character: C0 (NUL, tab,
// CR, LF …) or DEL. Bytes of multi-byte UTF-8 sequences never are.
func isControl(c byte) bool { return c < 0x20 || c == 0x7f }

// HasControl reports whether s holds a C0 control character other than
// tab, or DEL. CR, LF and NUL are among them: none belongs in a header, an
// address or a URL.
func HasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; isControl(c) && c != '\t' {
			return true
		}
	}
	return false
}

// CleanText reports whether s is valid UTF-8 without control characters,
// tab included: HasControl's rule for a name or a key, which is a single
// field.
func CleanText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if isControl(s[i]) {
			return false
		}
	}
	return true
}
