package domain

import (
	"strings"
	"unicode/utf8"

	"github.com/flinthq/flint/jobs"
)

// CheckText reports whether s is text PostgreSQL can store: valid UTF-8
// without NUL. The error is a *ValidationError naming field.
func CheckText(field, s string) error {
	if !utf8.ValidString(s) {
		return jobs.Invalid(field, "is not valid UTF-8 text")
	}
	if strings.IndexByte(s, 0) >= 0 {
		return jobs.Invalid(field, "must not contain NUL characters")
	}
	return nil
}

// StorableText returns s as PostgreSQL can store it: invalid UTF-8
// replaced with U+FFFD and NUL bytes dropped. For text Flint records
// rather than refuses (an error a worker or an endpoint reported).
func StorableText(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "")
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return s
}
