package logs

import (
	"encoding/json"
	"regexp"
	"strings"
)

// Redacted replaces every scrubbed value.
const Redacted = "[REDACTED]"

// secretKeyPattern is the regexp form of the key vocabulary, for secrets
// embedded in free text ("password=x", `"api_key":"x"`, "Authorization: x").
const secretKeyPattern = `[A-Za-z0-9_.-]*(?i:password|passwd|passphrase|secret|token|api[_-]?key|authorization|cookie|session|csrf|xsrf|private[_-]?key|credential)[A-Za-z0-9_.-]*` +
	`|(?:[A-Za-z0-9]+[_.-])*(?i:auth|pass|pwd|dsn)`

var (
	// scheme://user:password@host — the password runs to the last '@'
	// before the end of the authority, so unescaped '@' in it is covered.
	urlUserinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@\s:]*):([^/?#\s]*)@`)

	// key=value, key: value, "key":"value", key="value", 'key': 'value',
	// and the backslash-escaped JSON form \"key\":\"value\". Groups:
	// 1 key with its quotes and the separator, 2 the value.
	kvRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.-])((?:\\?["'])?(?:` + secretKeyPattern + `)(?:\\?["'])?\s*[:=]\s*)` +
		`(\[REDACTED\]|\\"(?:[^"\\]|\\[^"])*\\"|"(?:[^"\\]|\\.)*"|'[^']*'|(?i:(?:bearer|basic|digest|token)\s+)?[^\s,;&"'}\])]+)`)

	// Authorization-header credentials anywhere in text.
	bearerRE = regexp.MustCompile(`(?i)\b(bearer)(\s+)([A-Za-z0-9\-._~+/]+=*)`)
	basicRE  = regexp.MustCompile(`(?i)\b(basic)(\s+)([A-Za-z0-9+/]{8,}={0,2})`)
)

// Scrub removes secrets from free text: passwords in URL userinfo, Bearer
// and Basic credentials, and key=value / "key":"value" pairs whose key looks
// secret. Text with nothing suspicious is returned unchanged without any
// regexp work. A string holding a JSON object or array is scrubbed
// structurally: the value of every object field (at any depth) whose name
// looks secret is redacted, every string value is scrubbed as text, and the
// result is valid JSON.
func Scrub(s string) string {
	if len(s) < 4 {
		return s
	}
	hasURL := strings.Contains(s, "://") && strings.IndexByte(s, '@') >= 0
	hasSep := strings.IndexByte(s, '=') >= 0 || strings.IndexByte(s, ':') >= 0
	hasWord, hasAuthScheme := suspiciousWords(s)
	if !hasURL && !(hasSep && hasWord) && !hasAuthScheme {
		return s
	}
	if t := strings.TrimSpace(s); len(t) > 1 && (t[0] == '{' && t[len(t)-1] == '}' || t[0] == '[' && t[len(t)-1] == ']') && json.Valid([]byte(t)) {
		if out, changed := scrubJSON([]byte(s)); changed {
			return string(out)
		}
		return s
	}
	if hasURL {
		s = scrubUserinfo(s)
	}
	if hasSep && hasWord {
		s = replaceKV(s)
	}
	if hasAuthScheme {
		s = bearerRE.ReplaceAllString(s, "${1}${2}"+Redacted)
		s = replaceBasic(s)
	}
	return s
}

// ScrubUserinfo redacts the password in the user info of every URL in s,
// keeping the user name as url.URL.Redacted does:
// scheme://user:[REDACTED]@host. Scrub does this among the rest.
func ScrubUserinfo(s string) string {
	if !strings.Contains(s, "://") || strings.IndexByte(s, '@') < 0 {
		return s
	}
	return scrubUserinfo(s)
}

func scrubUserinfo(s string) string {
	return urlUserinfoRE.ReplaceAllString(s, "${1}${2}:"+Redacted+"@")
}

// looksBase64Credential keeps "basic configuration" while catching
// "Basic dXNlcjpwYXNz": an encoded credential has a digit, an upper-case
// letter or base64 punctuation somewhere.
func looksBase64Credential(tok string) bool {
	return strings.ContainsAny(tok, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ+/=")
}

// replaceBasic redacts Basic credentials (group 3 of basicRE).
func replaceBasic(s string) string {
	idx := basicRE.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	last := 0
	for _, m := range idx {
		if !looksBase64Credential(s[m[6]:m[7]]) {
			continue
		}
		b.WriteString(s[last:m[6]])
		b.WriteString(Redacted)
		last = m[7]
	}
	b.WriteString(s[last:])
	return b.String()
}

// replaceKV redacts the value of every secret-looking key=value pair.
func replaceKV(s string) string {
	idx := kvRE.FindAllStringSubmatchIndex(s, -1)
	if idx == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	last := 0
	for _, m := range idx {
		vs, ve := m[4], m[5]
		val := s[vs:ve]
		b.WriteString(s[last:vs])
		switch {
		case val == Redacted:
			b.WriteString(val)
		case strings.HasPrefix(val, `\"`):
			b.WriteString(`\"` + Redacted + `\"`)
		case val[0] == '"':
			b.WriteString(`"` + Redacted + `"`)
		case val[0] == '\'':
			b.WriteString(`'` + Redacted + `'`)
		default:
			b.WriteString(Redacted)
		}
		last = ve
	}
	b.WriteString(s[last:])
	return b.String()
}

// suspiciousWords scans s once, case-insensitively, for the secret
// vocabulary (word) and for "bearer"/"basic" (scheme), without allocating.
func suspiciousWords(s string) (word, scheme bool) {
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20 // ASCII lower-case (garbage for non-letters, harmless)
		switch c {
		case 'p':
			if hasPrefixFold(s[i:], "pass") || hasPrefixFold(s[i:], "pwd") || hasPrefixFold(s[i:], "private") {
				word = true
			}
		case 's':
			if hasPrefixFold(s[i:], "secret") || hasPrefixFold(s[i:], "session") {
				word = true
			}
		case 't':
			if hasPrefixFold(s[i:], "token") {
				word = true
			}
		case 'a':
			if hasPrefixFold(s[i:], "api") || hasPrefixFold(s[i:], "auth") {
				word = true
			}
		case 'c':
			if hasPrefixFold(s[i:], "cookie") || hasPrefixFold(s[i:], "csrf") || hasPrefixFold(s[i:], "credential") {
				word = true
			}
		case 'x':
			if hasPrefixFold(s[i:], "xsrf") {
				word = true
			}
		case 'd':
			if hasPrefixFold(s[i:], "dsn") {
				word = true
			}
		case 'b':
			if hasPrefixFold(s[i:], "bearer") || hasPrefixFold(s[i:], "basic") {
				scheme = true
			}
		}
		if word && scheme {
			return
		}
	}
	return
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
