package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

const invoiceSchema = `{
  "type": "object",
  "properties": {
    "currency": {"type": "string", "minLength": 3, "maxLength": 3},
    "lines": {"type": "array", "minItems": 1, "items": {
      "type": "object",
      "properties": {"quantity": {"type": "integer", "minimum": 1}, "description": {"type": "string"}},
      "required": ["quantity"]
    }}
  },
  "required": ["currency", "lines"],
  "additionalProperties": false
}`

func fieldOf(t *testing.T, err error) string {
	t.Helper()
	var ve *jobs.ValidationError
	require.True(t, errors.As(err, &ve), "want a *ValidationError, got %v", err)
	return ve.Field
}

func TestPayloadSchemaValidateNamesTheField(t *testing.T) {
	s, err := jobs.CompileSchema(json.RawMessage(invoiceSchema))
	require.NoError(t, err)
	require.Len(t, s.Hash, 64)
	require.NoError(t, s.Validate(json.RawMessage(`{"currency":"EUR","lines":[{"quantity":2}]}`)))
	cases := map[string]string{
		`{"currency":"EURO","lines":[{"quantity":2}]}`:               "payload.currency",
		`{"currency":"EUR","lines":[{"quantity":2},{"quantity":0}]}`: "payload.lines[1].quantity",
		`{"currency":"EUR","lines":[{"quantity":"two"}]}`:            "payload.lines[0].quantity",
		`{"currency":"EUR","lines":[]}`:                              "payload.lines",
		`{"lines":[{"quantity":1}]}`:                                 "payload.currency",
		`{"currency":"EUR","lines":[{"quantity":1}],"extra":1}`:      "payload.extra",
	}
	for payload, field := range cases {
		err := s.Validate(json.RawMessage(payload))
		require.Error(t, err, payload)
		require.Equal(t, field, fieldOf(t, err), payload)
	}
	err = s.Validate(json.RawMessage(`{"lines":[{"quantity":1}]}`))
	require.Contains(t, err.Error(), "currency")
}

func TestCompileSchemaRefusesWhatCannotBeBounded(t *testing.T) {
	bad := map[string]string{
		"not an object":  `[1]`,
		"not JSON":       `{"type":`,
		"invalid schema": `{"type": "strnig"}`,
		"negative count": `{"minLength": -1}`,
		"external ref":   `{"$ref": "https://example.com/s.json"}`,
		"file ref":       `{"$ref": "file:///etc/passwd"}`,
		"recursive":      `{"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}`,
		"uniqueItems":    `{"properties": {"tags": {"type": "array", "uniqueItems": true}}}`,
		"bad pattern":    `{"properties": {"a": {"type": "string", "pattern": "("}}}`,
		"deep":           strings.Repeat(`{"not":`, 40) + `{}` + strings.Repeat(`}`, 40),
		"oversized":      `{"description": "` + strings.Repeat("x", jobs.MaxSchemaBytes) + `"}`,
	}
	// Each level refers to the next twice: 2^20 subschemas once $refs
	// are followed, from a few hundred bytes of text.
	var defs []string
	for i := range 20 {
		defs = append(defs, fmt.Sprintf(`"d%d": {"allOf": [{"$ref": "#/$defs/d%d"}, {"$ref": "#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, `"d20": {"type": "string"}`)
	bad["exponential refs"] = `{"$defs": {` + strings.Join(defs, ",") + `}, "$ref": "#/$defs/d0"}`
	for name, raw := range bad {
		_, err := jobs.CompileSchema(json.RawMessage(raw))
		require.Error(t, err, name)
	}
	_, err := jobs.CompileSchema(json.RawMessage(`{"properties": {"tags": {"type": "array", "uniqueItems": true, "maxItems": 50}}}`))
	require.NoError(t, err)
}

type schemaLine struct {
	Description string `json:"description,omitempty" jsonschema_description:"What was sold"`
	Quantity    int    `json:"quantity" jsonschema:"required,minimum=1"`
}

type schemaBase struct {
	ID string `json:"id" jsonschema:"required,pattern=^inv-[0-9]+$"`
}

type schemaInvoice struct {
	schemaBase
	Currency string            `json:"currency" jsonschema:"required,minLength=3,maxLength=3"`
	Lines    []schemaLine      `json:"lines" jsonschema:"required,minItems=1"`
	Due      *time.Time        `json:"due,omitempty"`
	Kind     string            `json:"kind,omitempty" jsonschema:"enum=sale|refund"`
	Meta     map[string]string `json:"meta,omitempty"`
	Extra    json.RawMessage   `json:"extra,omitempty"`
	Unsigned uint              `json:"unsigned,omitempty"`
	skipped  int
	Ignored  int `json:"-"`
}

func TestSchemaForDerivesFromTheStruct(t *testing.T) {
	raw, err := jobs.SchemaFor[schemaInvoice]()
	require.NoError(t, err)
	// Properties come in the struct's order, embedded fields in place.
	require.Less(t, strings.Index(string(raw), `"id"`), strings.Index(string(raw), `"currency"`))
	require.Less(t, strings.Index(string(raw), `"currency"`), strings.Index(string(raw), `"lines"`))
	require.NotContains(t, string(raw), "skipped", "unexported fields (%d here) are not part of the JSON", schemaInvoice{}.skipped)
	require.NotContains(t, string(raw), "Ignored")
	s, err := jobs.CompileSchema(raw)
	require.NoError(t, err)
	ok := `{"id":"inv-1","currency":"EUR","lines":[{"quantity":1,"description":"x"}],"due":"2026-01-02T03:04:05Z",
		"kind":"sale","meta":{"a":"b"},"extra":[1,{"x":null}],"unsigned":4}`
	require.NoError(t, s.Validate(json.RawMessage(ok)))
	require.NoError(t, s.Validate(json.RawMessage(`{"id":"inv-1","currency":"EUR","lines":[{"quantity":1}],"due":null,"meta":null}`)),
		"nil pointers and maps are written null")
	for payload, field := range map[string]string{
		`{"id":"inv-1","currency":"EURO","lines":[{"quantity":1}]}`:              "payload.currency",
		`{"id":"x","currency":"EUR","lines":[{"quantity":1}]}`:                   "payload.id",
		`{"id":"inv-1","currency":"EUR","lines":[{"quantity":0}]}`:               "payload.lines[0].quantity",
		`{"id":"inv-1","currency":"EUR","lines":[{"quantity":1}],"kind":"gift"}`: "payload.kind",
		`{"id":"inv-1","currency":"EUR","lines":[{"quantity":1}],"unsigned":-1}`: "payload.unsigned",
		`{"id":"inv-1","currency":"EUR","lines":[{"quantity":1}],"due":"soon"}`:  "",
		`{"id":"inv-1","currency":"EUR","lines":[{"quantity":1}],"typo":1}`:      "payload.typo",
		`{"id":"inv-1","lines":[{"quantity":1}]}`:                                "payload.currency",
		`{"id":"inv-1","currency":"EUR","lines":null}`:                           "payload.lines",
	} {
		err := s.Validate(json.RawMessage(payload))
		if field == "" { // format is an annotation in draft 2020-12
			require.NoError(t, err, payload)
			continue
		}
		require.Error(t, err, payload)
		require.Equal(t, field, fieldOf(t, err), payload)
	}
}

func TestTypedHandlerProvidesItsSchema(t *testing.T) {
	r := jobs.NewRegistry()
	r.Register("resize", jobs.Typed(func(_ context.Context, _ *jobs.Job, a resizeArgs) (any, error) { return nil, nil }))
	r.Register("plain", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) { return nil, nil }))
	got, err := r.Schemas()
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.JSONEq(t, `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"properties":{"url":{"type":"string"},"width":{"type":"integer"}},"additionalProperties":false}`, string(got["resize"]))
}

func TestSchemaForRefusesABadTag(t *testing.T) {
	type bad struct {
		N int `json:"n" jsonschema:"minimum=lots"`
	}
	_, err := jobs.SchemaFor[bad]()
	require.ErrorContains(t, err, "minimum")
	type unknown struct {
		N int `json:"n" jsonschema:"mininum=1"`
	}
	_, err = jobs.SchemaFor[unknown]()
	require.ErrorContains(t, err, "mininum")
}

// BenchmarkSchemaValidate is what checking a payload against its type's
// schema costs at enqueue: a small invoice, and a payload near the 1 MiB
// limit (lines of an invoice) against the same schema.
func BenchmarkSchemaValidate(b *testing.B) {
	s, err := jobs.CompileSchema(json.RawMessage(invoiceSchema))
	require.NoError(b, err)
	small := json.RawMessage(`{"currency":"EUR","lines":[{"quantity":3,"description":"Widget"},{"quantity":1},{"quantity":2}]}`)
	var lines []string
	for len(strings.Join(lines, ",")) < jobs.MaxPayloadBytes-200 {
		lines = append(lines, fmt.Sprintf(`{"quantity":%d,"description":"line %d of a long invoice"}`, len(lines)+1, len(lines)))
	}
	large := json.RawMessage(`{"currency":"EUR","lines":[` + strings.Join(lines, ",") + `]}`)
	for _, c := range []struct {
		name    string
		payload json.RawMessage
	}{{"small", small}, {"1MiB", large}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.payload)))
			for b.Loop() {
				if err := s.Validate(c.payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
