package logs

import (
	"bytes"
	"encoding/json"
	"strings"
)

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
	word, scheme, token := suspiciousWords(s)
	return word || scheme || token || strings.Contains(s, `\u`) ||
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
