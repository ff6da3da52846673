package jobs

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Limits on the JSON users hand Flint (payloads, results, and any JSON a
// worker or a push endpoint answers with). encoding/json accepts 10,000
// levels of nesting and PostgreSQL more; a document nested that deeply is
// an attack on whoever renders it, not data.
const (
	// MaxJSONDepth is how deeply objects and arrays may nest: the payload
	// object itself is level 1.
	MaxJSONDepth = 64
	// MaxNumberGrowth is how many characters longer than its written form
	// a JSON number may become when PostgreSQL writes it out in full (it
	// keeps numbers as numeric, without exponents): 1e30 is fine, 1e131071
	// would come back as 131,072 digits.
	MaxNumberGrowth = 40
)

// CheckJSON reports whether raw is one JSON value that Flint can store in
// PostgreSQL and show: valid JSON, nested at most MaxJSONDepth levels,
// its strings and keys valid UTF-8 without U+0000 or a lone UTF-16
// surrogate escape (\ud800), its numbers within what PostgreSQL's numeric
// holds and at most MaxNumberGrowth characters longer written out in
// full. It does not limit the size; callers have their own limits. The
// error is a *ValidationError naming field, with the byte offset of the
// fault. Every entry point for user JSON calls it (enqueue, finish,
// push answers), so none of them can make the database refuse a
// statement that also carries other people's rows.
func CheckJSON(field string, raw []byte) error {
	if !json.Valid(raw) {
		return Invalid(field, "is not valid JSON")
	}
	return checkJSONText(field, raw)
}

// checkJSONText is CheckJSON for raw already known to be valid JSON: one
// pass over the bytes, allocating nothing unless it finds a fault.
func checkJSONText(field string, raw []byte) error {
	depth := 0
	for i := 0; i < len(raw); {
		switch c := raw[i]; {
		case c == '{' || c == '[':
			if depth++; depth > MaxJSONDepth {
				return Invalid(field, "nests deeper than %d levels (at byte %d); flatten it", MaxJSONDepth, i)
			}
			i++
		case c == '}' || c == ']':
			depth--
			i++
		case c == '"':
			end, err := scanJSONString(field, raw, i+1)
			if err != nil {
				return err
			}
			i = end
		case c == '-' || ('0' <= c && c <= '9'):
			end, err := scanJSONNumber(field, raw, i)
			if err != nil {
				return err
			}
			i = end
		default:
			i++
		}
	}
	return nil
}

// scanJSONString checks the string whose content starts at raw[i] and
// returns the index just past its closing quote.
func scanJSONString(field string, raw []byte, i int) (int, error) {
	for i < len(raw) {
		c := raw[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if raw[i+1] != 'u' {
				i += 2
				continue
			}
			next, err := checkUnicodeEscape(field, raw, i)
			if err != nil {
				return 0, err
			}
			i = next
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size <= 1 {
				return 0, Invalid(field, "holds bytes that are not valid UTF-8 (at byte %d)", i)
			}
			i += size
		}
	}
	return i, nil
}

// checkUnicodeEscape checks the \uXXXX escape at raw[i] (a pair, for a
// surrogate) and returns the index past it.
func checkUnicodeEscape(field string, raw []byte, i int) (int, error) {
	u := hex4(raw[i+2 : i+6])
	switch {
	case u == 0:
		return 0, Invalid(field, "must not contain NUL characters (\\u0000, at byte %d)", i)
	case u >= 0xDC00 && u <= 0xDFFF:
		return 0, Invalid(field, "holds a lone UTF-16 surrogate (\\u%04x, at byte %d), which is not text", u, i)
	case u >= 0xD800 && u <= 0xDBFF:
		j := i + 6
		if j+6 > len(raw) || raw[j] != '\\' || raw[j+1] != 'u' {
			return 0, Invalid(field, "holds a lone UTF-16 surrogate (\\u%04x, at byte %d), which is not text", u, i)
		}
		if lo := hex4(raw[j+2 : j+6]); lo < 0xDC00 || lo > 0xDFFF {
			return 0, Invalid(field, "holds a lone UTF-16 surrogate (\\u%04x, at byte %d), which is not text", u, i)
		}
		return j + 6, nil
	}
	return i + 6, nil
}

// hex4 reads four hex digits (valid JSON has them there).
func hex4(b []byte) int {
	n := 0
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			n = n<<4 | int(c-'0')
		case 'a' <= c && c <= 'f':
			n = n<<4 | int(c-'a'+10)
		default:
			n = n<<4 | int(c-'A'+10)
		}
	}
	return n
}

// scanJSONNumber checks the number starting at raw[i] against what
// PostgreSQL's numeric writes out (every digit, no exponent) and returns
// the index past it.
func scanJSONNumber(field string, raw []byte, i int) (int, error) {
	start := i
	if raw[i] == '-' {
		i++
	}
	intDigits, fracDigits, leadingZeros, significant := 0, 0, 0, false
	for ; i < len(raw) && '0' <= raw[i] && raw[i] <= '9'; i++ {
		if raw[i] == '0' && !significant {
			leadingZeros++
		} else {
			significant = true
		}
		intDigits++
	}
	if i < len(raw) && raw[i] == '.' {
		for i++; i < len(raw) && '0' <= raw[i] && raw[i] <= '9'; i++ {
			fracDigits++
		}
	}
	if i >= len(raw) || (raw[i] != 'e' && raw[i] != 'E') {
		return i, nil
	}
	i++
	neg := false
	if raw[i] == '+' || raw[i] == '-' {
		neg = raw[i] == '-'
		i++
	}
	exp := 0
	for ; i < len(raw) && '0' <= raw[i] && raw[i] <= '9'; i++ {
		if exp < 1<<20 {
			exp = exp*10 + int(raw[i]-'0')
		}
	}
	if neg {
		exp = -exp
	}
	// Written out in full: the integer digits move by exp, and so do the
	// fraction's (PostgreSQL keeps a fraction's trailing zeros).
	whole := max(intDigits-leadingZeros+exp, 1)
	frac := max(fracDigits-exp, 0)
	if whole+frac > (i-start)+MaxNumberGrowth || whole > 131072 || frac > 16383 {
		return 0, Invalid(field, "holds the number %s (at byte %d), which would be stored as %d digits; "+
			"keep exponents small or send it as a string", shortNumber(raw[start:i]), start, whole+frac)
	}
	return i, nil
}

// shortNumber is a number for an error message, cut if it is long.
func shortNumber(b []byte) string {
	if len(b) > 40 {
		return fmt.Sprintf("%s…", b[:40])
	}
	return string(b)
}
