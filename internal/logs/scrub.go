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
const secretKeyPattern = `[A-Za-z0-9_.-]*(?i:password|passwd|passphrase|secret|token|api[_-]?key|authorization|cookie|session|csrf|xsrf|private[_-]?key|credential|signature)[A-Za-z0-9_.-]*` +
	`|(?:[A-Za-z0-9]+[_.-])*(?i:auth|pass|pwd|dsn|sig)`

var (
	// scheme://user:password@host — the password runs to the last '@'
	// before a query, a fragment or a space, so an unescaped '@' or '/' in
	// it (amqp://guest:pa/ss@host) is covered.
	urlUserinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@\s:]*):([^?#\s]*)@`)

	// key=value, key: value, "key":"value", key="value", 'key': 'value',
	// and the backslash-escaped JSON form \"key\":\"value\". Groups:
	// 1 key with its quotes and the separator, 2 the value.
	// The separator may be URL-encoded (password%3Dhunter2).
	kvRE = regexp.MustCompile(`(?:^|[^A-Za-z0-9_.-])((?:\\?["'])?(?:` + secretKeyPattern + `)(?:\\?["'])?\s*(?:[:=]|%3[DdAa])\s*)` +
		`(\[REDACTED\]|\\"(?:[^"\\]|\\[^"])*\\"|"(?:[^"\\]|\\.)*"|'[^']*'|(?i:(?:bearer|basic|digest|token)\s+)?[^\s,;&"'}\])]+)`)

	// Authorization-header credentials anywhere in text.
	bearerRE = regexp.MustCompile(`(?i)\b(bearer)(\s+)([A-Za-z0-9\-._~+/]+=*)`)
	basicRE  = regexp.MustCompile(`(?i)\b(basic)(\s+)([A-Za-z0-9+/]{8,}={0,2})`)

	// An environment variable that names a secret, then its value after
	// a space, as shells and process lists show it: PGPASSWORD hunter2,
	// DB_PASSWORD s3cret. Upper case only, and a prefix before the word,
	// so prose ("PASSWORD RESET") is left alone.
	envRE = regexp.MustCompile(`\b([A-Z][A-Z0-9]*_?(?:PASSWORD|PASSWD|PWD|SECRET|TOKEN|API_?KEY)(?:_[A-Z0-9]+)*)([ \t]+)([^\s=:]\S*)`)
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
	hasSep := strings.IndexByte(s, '=') >= 0 || strings.IndexByte(s, ':') >= 0 || strings.Contains(s, "%3")
	hasWord, hasAuthScheme, hasToken := suspiciousWords(s)
	if !hasURL && !hasWord && !hasAuthScheme && !hasToken {
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
	if hasWord {
		s = envRE.ReplaceAllString(s, "${1}${2}"+Redacted)
	}
	if hasAuthScheme {
		s = bearerRE.ReplaceAllString(s, "${1}${2}"+Redacted)
		s = replaceBasic(s)
	}
	if hasToken {
		s = scrubTokens(s)
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
// vocabulary (word), for "bearer"/"basic" (scheme) and for the prefixes
// of the token formats in tokenRules (token), without allocating.
func suspiciousWords(s string) (word, scheme, token bool) {
	for i := 0; i < len(s); i++ {
		rest := s[i:]
		switch s[i] | 0x20 { // ASCII lower-case (garbage for non-letters, harmless)
		case 'p':
			word = word || hasPrefixFold(rest, "pass") || hasPrefixFold(rest, "pwd") || hasPrefixFold(rest, "private")
		case 's':
			word = word || hasPrefixFold(rest, "secret") || hasPrefixFold(rest, "session") || hasPrefixFold(rest, "sig")
			token = token || hasPrefixFold(rest, "sk_") || hasPrefixFold(rest, "sg.")
		case 't':
			word = word || hasPrefixFold(rest, "token")
		case 'a':
			word = word || hasPrefixFold(rest, "api") || hasPrefixFold(rest, "auth")
			token = token || hasPrefixFold(rest, "akia") || hasPrefixFold(rest, "asia") || hasPrefixFold(rest, "abia") ||
				hasPrefixFold(rest, "acca") || hasPrefixFold(rest, "a3t") || hasPrefixFold(rest, "aiza")
		case 'c':
			word = word || hasPrefixFold(rest, "cookie") || hasPrefixFold(rest, "csrf") || hasPrefixFold(rest, "credential")
		case 'x':
			word = word || hasPrefixFold(rest, "xsrf")
			token = token || hasPrefixFold(rest, "xox")
		case 'd':
			word = word || hasPrefixFold(rest, "dsn")
		case 'b':
			scheme = scheme || hasPrefixFold(rest, "bearer") || hasPrefixFold(rest, "basic")
		case 'e':
			token = token || hasPrefixFold(rest, "eyj")
		case 'g':
			token = token || (len(rest) > 3 && rest[3] == '_' && hasPrefixFold(rest, "gh")) || hasPrefixFold(rest, "github_pat_")
		case 'r':
			token = token || hasPrefixFold(rest, "rk_")
		case 'f':
			token = token || hasPrefixFold(rest, "flint_")
		case 'w':
			token = token || hasPrefixFold(rest, "whsec_")
		case 'n':
			token = token || hasPrefixFold(rest, "npm_")
		case '-':
			token = token || hasPrefixFold(rest, "-----BEGIN")
		}
	}
	return word, scheme, token
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}
