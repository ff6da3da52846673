package logs

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
)

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

var (
	rawMessageType = reflect.TypeOf(json.RawMessage(nil))
	textMarshaler  = reflect.TypeOf((*interface{ MarshalText() ([]byte, error) })(nil)).Elem()
)
