package jsonutil

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/google/uuid"
)

// DecodeStrict decodes a payload into v, refusing unknown fields so that a
// typo in a payload is caught at enqueue time.
func DecodeStrict(payload json.RawMessage, v any) error {
	dec := json.NewDecoder(BytesReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s", DescribeJSONError(err))
	}
	return nil
}

func AppendUUID(b []byte, id uuid.UUID) []byte {
	b = append(b, '"')
	var s [36]byte
	// uuid.UUID's MarshalText writes into a fresh slice; encode in place.
	const hexd = "0123456789abcdef"
	p := 0
	for i, c := range id {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			s[p] = '-'
			p++
		}
		s[p], s[p+1] = hexd[c>>4], hexd[c&0xf]
		p += 2
	}
	b = append(b, s[:]...)
	return append(b, '"')
}

// AppendString quotes s. Strings that need no escaping (type and queue
// names, ids, most messages) are copied; others go through encoding/json.
func AppendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			_ = enc.Encode(s) // a string always encodes
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// AppendTime writes t as time.Time's MarshalJSON does.
func AppendTime(b []byte, t time.Time) []byte {
	if y := t.Year(); y < 0 || y > 9999 {
		enc, err := json.Marshal(t)
		if err != nil {
			return append(b, "null"...)
		}
		return append(b, enc...)
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

func BytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// DescribeJSONError turns an encoding/json error into a message a caller can
// act on, naming the field where the decoder knows it.
func DescribeJSONError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		if typ.Field != "" {
			return fmt.Sprintf("%q must be %s, not %s", typ.Field, JSONKind(typ.Type.Kind().String()), typ.Value)
		}
		return fmt.Sprintf("must be %s, not %s", JSONKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "malformed JSON: unexpected end of input"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	default:
		return strings.TrimPrefix(err.Error(), "json: ")
	}
}

// JSONKind names, for an error message, the JSON value a Go kind (as
// reflect.Kind.String gives it) expects.
func JSONKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer in range"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "a list"
	case "map", "struct":
		return "an object"
	default:
		return "a different type"
	}
}
