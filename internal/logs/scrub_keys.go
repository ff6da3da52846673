package logs

import (
	"bytes"
	"strings"
	"sync"
	"unicode"
)

// secretSubstrings are matched case-insensitively against an attribute key
// with its separators ('_', '-', '.', ' ') removed, so "smtp_password",
// "X-Api-Key", "apiKey" and "Set-Cookie" all match.
var secretSubstrings = []string{
	"password", "passwd", "passphrase", "secret", "token", "apikey",
	"authorization", "cookie", "session", "csrf", "xsrf", "privatekey",
	"credential", "signature",
}

// secretWords must match one whole word of the key (words split at
// separators and camelCase boundaries): "auth" and "auth_header" match,
// "author" does not.
var secretWords = map[string]bool{"auth": true, "pass": true, "pwd": true, "bearer": true, "dsn": true, "sig": true}

// keyCache remembers the verdict for keys already seen; log keys come from a
// small, fixed vocabulary, so this turns the check into one map lookup.
var (
	keyCache     sync.Map // string → bool
	keyCacheSize int64
	keyCacheMu   sync.Mutex
)

const keyCacheMax = 4096

// IsSecretKey reports whether an attribute or field named key holds a secret
// and must have its value redacted.
func IsSecretKey(key string) bool {
	if v, ok := keyCache.Load(key); ok {
		return v.(bool)
	}
	secret := isSecretKey(key)
	keyCacheMu.Lock()
	if keyCacheSize < keyCacheMax {
		if _, loaded := keyCache.LoadOrStore(key, secret); !loaded {
			keyCacheSize++
		}
	}
	keyCacheMu.Unlock()
	return secret
}

func isSecretKey(key string) bool {
	if key == "" {
		return false
	}
	var stack [64]byte
	norm := stack[:0]
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c == '_' || c == '-' || c == '.' || c == ' ':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		norm = append(norm, c)
	}
	for _, s := range secretSubstrings {
		if bytes.Contains(norm, []byte(s)) {
			return true
		}
	}
	for _, w := range keyWords(key) {
		if secretWords[w] {
			return true
		}
	}
	return false
}

// keyWords splits a key into lower-case words at non-alphanumerics and at
// camelCase boundaries ("smtpPass" → "smtp", "pass").
func keyWords(key string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(key)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if unicode.IsUpper(r) && len(cur) > 0 {
			prevLower := unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if prevLower || (unicode.IsUpper(rs[i-1]) && nextLower) {
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}
