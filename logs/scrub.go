package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"unicode"
)

// Redacted replaces every scrubbed value.
const Redacted = "[REDACTED]"

// secretSubstrings are matched case-insensitively against an attribute key
// with its separators ('_', '-', '.', ' ') removed, so "smtp_password",
// "X-Api-Key", "apiKey" and "Set-Cookie" all match.
var secretSubstrings = []string{
	"password", "passwd", "passphrase", "secret", "token", "apikey",
	"authorization", "cookie", "session", "csrf", "xsrf", "privatekey",
	"credential",
}

// secretWords must match one whole word of the key (words split at
// separators and camelCase boundaries): "auth" and "auth_header" match,
// "author" does not.
var secretWords = map[string]bool{"auth": true, "pass": true, "pwd": true, "bearer": true, "dsn": true}

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

// scrubJSON expects valid JSON.
func scrubJSON(raw []byte) ([]byte, bool) {
	if !jsonMayHoldSecret(raw) {
		return raw, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw, false
	}
	v, changed := scrubTree(v)
	if !changed {
		return raw, false
	}
	out, err := marshalNoEscape(v)
	if err != nil {
		return []byte(`"` + Redacted + `"`), true
	}
	return out, true
}

// jsonMayHoldSecret is the cheap pre-check before decoding: a secret word,
// a URL with userinfo, or a \u escape (which could spell a secret key).
func jsonMayHoldSecret(raw []byte) bool {
	s := string(raw)
	word, scheme := suspiciousWords(s)
	return word || scheme || strings.Contains(s, `\u`) ||
		(strings.Contains(s, "://") && strings.IndexByte(s, '@') >= 0)
}

// scrubTree walks a decoded JSON value (map[string]any, []any, string,
// json.Number, bool, nil), returning a redacted copy when something changed.
func scrubTree(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		changed := false
		out := make(map[string]any, len(t))
		for k, fv := range t {
			if IsSecretKey(k) {
				if s, ok := fv.(string); !ok || s != Redacted {
					changed = true
				}
				out[k] = Redacted
				continue
			}
			nv, c := scrubTree(fv)
			changed = changed || c
			out[k] = nv
		}
		if !changed {
			return v, false
		}
		return out, true
	case []any:
		changed := false
		out := make([]any, len(t))
		for i, ev := range t {
			nv, c := scrubTree(ev)
			changed = changed || c
			out[i] = nv
		}
		if !changed {
			return v, false
		}
		return out, true
	case string:
		if s := Scrub(t); s != t {
			return s, true
		}
		return v, false
	default:
		return v, false
	}
}

func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// scrubHandler redacts secrets from a record's message and attributes (and
// from attributes added with WithAttrs) before the wrapped handler sees
// them. Within a group whose name looks secret (WithGroup("auth")), every
// value is redacted.
type scrubHandler struct {
	next      slog.Handler
	redactAll bool
}

func newScrubHandler(next slog.Handler) *scrubHandler { return &scrubHandler{next: next} }

// Scrubbing wraps next so that every record it handles is scrubbed first,
// by the rules of the log file: for records that go somewhere other than
// this package's outputs (a job's own log).
func Scrubbing(next slog.Handler) slog.Handler { return newScrubHandler(next) }

func (h *scrubHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *scrubHandler) Handle(ctx context.Context, r slog.Record) error {
	nr := slog.NewRecord(r.Time, r.Level, Scrub(r.Message), r.PC)
	attrs := make([]slog.Attr, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, scrubAttr(a, h.redactAll))
		return true
	})
	nr.AddAttrs(attrs...)
	return h.next.Handle(ctx, nr)
}

func (h *scrubHandler) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = scrubAttr(a, h.redactAll)
	}
	return &scrubHandler{next: h.next.WithAttrs(out), redactAll: h.redactAll}
}

func (h *scrubHandler) WithGroup(name string) slog.Handler {
	return &scrubHandler{next: h.next.WithGroup(name), redactAll: h.redactAll || IsSecretKey(name)}
}

func scrubAttr(a slog.Attr, redactAll bool) slog.Attr {
	a.Value = a.Value.Resolve()
	if a.Value.Kind() == slog.KindGroup {
		secret := redactAll || IsSecretKey(a.Key)
		if secret && a.Key != "" {
			return slog.String(a.Key, Redacted)
		}
		g := a.Value.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = scrubAttr(ga, secret)
		}
		return slog.Attr{Key: a.Key, Value: slog.GroupValue(out...)}
	}
	if a.Key != "" && (redactAll || IsSecretKey(a.Key)) {
		return slog.String(a.Key, Redacted)
	}
	switch a.Value.Kind() {
	case slog.KindString:
		s := a.Value.String()
		if out := Scrub(s); out != s {
			return slog.String(a.Key, out)
		}
	case slog.KindAny:
		if v, ok := scrubAny(a.Value.Any()); ok {
			return slog.Attr{Key: a.Key, Value: v}
		}
	}
	return a
}

var (
	rawMessageType = reflect.TypeOf(json.RawMessage(nil))
	textMarshaler  = reflect.TypeOf((*interface{ MarshalText() ([]byte, error) })(nil)).Elem()
)

// scrubAny handles slog.KindAny values; ok reports a replacement.
func scrubAny(v any) (slog.Value, bool) {
	switch t := v.(type) {
	case nil:
		return slog.Value{}, false
	case error:
		msg := t.Error()
		if out := Scrub(msg); out != msg {
			return slog.StringValue(out), true
		}
		return slog.Value{}, false
	case json.RawMessage:
		if !json.Valid(t) {
			return slog.StringValue(Scrub(string(t))), true
		}
		if out, changed := scrubJSON(t); changed {
			return slog.AnyValue(json.RawMessage(out)), true
		}
		return slog.Value{}, false
	case []byte:
		if json.Valid(t) {
			// Logged as JSON rather than base64 so the scrubbed payload
			// stays readable in the file.
			out, _ := scrubJSON(t)
			return slog.AnyValue(json.RawMessage(out)), true
		}
		s := string(t)
		if out := Scrub(s); out != s {
			return slog.AnyValue([]byte(out)), true
		}
		return slog.Value{}, false
	}
	rt := reflect.TypeOf(v)
	if rt == rawMessageType || rt.Implements(textMarshaler) {
		// Types that print as text (ids, times, addresses): leave them.
		return slog.Value{}, false
	}
	kind := rt.Kind()
	if kind == reflect.Pointer {
		kind = rt.Elem().Kind()
	}
	switch kind {
	case reflect.Map, reflect.Struct, reflect.Slice, reflect.Array:
	default:
		return slog.Value{}, false
	}
	// Composite values are logged through encoding/json by the JSON handler;
	// scrub exactly that representation.
	raw, err := json.Marshal(v)
	if err != nil {
		return slog.Value{}, false
	}
	if out, changed := scrubJSON(raw); changed {
		return slog.AnyValue(json.RawMessage(out)), true
	}
	return slog.Value{}, false
}
