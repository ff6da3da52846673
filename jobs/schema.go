package jobs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Payload schemas. A job type may carry a JSON Schema for its payload: one
// derived from a typed Go handler's struct (SchemaFor), one a pull worker
// declares when it registers, or one given with a push queue's settings.
// It is stored with the type in PostgreSQL, so every API process checks a
// payload against it at enqueue, whichever process registered it.
//
// Validation is github.com/santhosh-tekuri/jsonschema/v6, which passes the
// official JSON-Schema-Test-Suite for drafts 4 to 2020-12; a schema
// without "$schema" is read as draft 2020-12. Its cost is bounded at
// registration: at most MaxSchemaBytes of text, no $ref outside the schema
// itself (no files, no network), no recursive $ref, at most
// MaxSchemaNodes subschemas once every $ref is followed, and uniqueItems
// (quadratic in the array's length) only under a maxItems of at most
// MaxUniqueItems. Patterns are Go regular expressions, linear in the text.

// Limits on payload schemas.
const (
	MaxSchemaBytes = 64 << 10 // a schema's JSON text
	MaxSchemaNodes = 2000     // subschemas, counted along every $ref
	MaxUniqueItems = 1000     // maxItems an array with uniqueItems may have
	maxSchemaDepth = 32       // nesting of the schema's JSON
)

// PayloadSchema is a job type's compiled payload schema.
type PayloadSchema struct {
	// Text is the schema's JSON, compacted.
	Text json.RawMessage
	// Hash is the SHA-256 of Text, in hex: equal schemas have equal hashes.
	Hash     string
	compiled *jsonschema.Schema
}

// SchemaHash returns the hash CompileSchema gives text (compacted JSON).
func SchemaHash(text []byte) string {
	sum := sha256.Sum256(text)
	return hex.EncodeToString(sum[:])
}

// noLoader refuses every $ref to a document other than the schema itself.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("$ref to %s: a payload schema may refer only to itself (#...)", url)
}

// CompileSchema checks raw as a payload schema and compiles it. Its error
// says what is wrong, without a field; the caller names the field.
func CompileSchema(raw json.RawMessage) (*PayloadSchema, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > MaxSchemaBytes {
		return nil, fmt.Errorf("is %d bytes; the limit is %d", len(raw), MaxSchemaBytes)
	}
	if len(raw) == 0 || raw[0] != '{' {
		return nil, errors.New("must be a JSON Schema object")
	}
	if err := checkJSONText("schema", raw); err != nil {
		return nil, errors.New(strings.TrimPrefix(err.Error(), "schema: "))
	}
	if d := jsonDepth(raw); d > maxSchemaDepth {
		return nil, fmt.Errorf("nests %d levels deep; the limit is %d", d, maxSchemaDepth)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("is not valid JSON: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	const loc = "flint:payload.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, schemaError(err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return nil, schemaError(err)
	}
	if err := checkSchemaCost(sch); err != nil {
		return nil, err
	}
	text := json.RawMessage(buf.Bytes())
	return &PayloadSchema{Text: text, Hash: SchemaHash(text), compiled: sch}, nil
}

// schemaError shortens the compiler's message: the schema's made-up
// location means nothing to whoever sent it.
func schemaError(err error) error {
	var sve *jsonschema.SchemaValidationError
	var ve *jsonschema.ValidationError
	if errors.As(err, &sve) && errors.As(sve.Err, &ve) {
		leaf := firstLeaf(ve)
		return fmt.Errorf("is not a valid JSON Schema: at %s: %s", "#/"+strings.Join(leaf.InstanceLocation, "/"),
			leaf.ErrorKind.LocalizedString(englishPrinter))
	}
	msg := strings.ReplaceAll(err.Error(), "flint:payload.json", "")
	return fmt.Errorf("is not a valid JSON Schema: %s", strings.TrimSpace(msg))
}

// jsonDepth returns how deeply raw (valid JSON) nests objects and arrays.
func jsonDepth(raw []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(raw); i++ {
		switch c := raw[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// englishPrinter renders the validator's messages.
var englishPrinter = message.NewPrinter(language.English)

// Validate checks payload (a JSON object) against the schema. It returns a
// *ValidationError whose field is where in the payload the first fault is
// ("payload.lines[0].quantity"; "payload" for the payload as a whole).
func (s *PayloadSchema) Validate(payload json.RawMessage) error {
	if len(payload) == 0 {
		payload = json.RawMessage(`{}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return Invalid("payload", "is not valid JSON")
	}
	err = s.compiled.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return Invalid("payload", "%s", err.Error())
	}
	leaf := firstLeaf(ve)
	loc := leaf.InstanceLocation
	// A missing or unknown property is named as the field itself.
	switch k := leaf.ErrorKind.(type) {
	case *kind.Required:
		loc = append(slices.Clone(loc), k.Missing[0])
	case *kind.AdditionalProperties:
		loc = append(slices.Clone(loc), k.Properties[0])
	}
	return Invalid(payloadPath(loc), "%s (the type's payload schema)", leaf.ErrorKind.LocalizedString(englishPrinter))
}

// firstLeaf follows the first cause down to an error with none: the most
// precise thing to say.
func firstLeaf(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	for len(e.Causes) > 0 {
		e = e.Causes[0]
	}
	return e
}

// payloadPath spells an instance location as a field: payload.a[0].b.
func payloadPath(loc []string) string {
	var b strings.Builder
	b.WriteString("payload")
	for _, tok := range loc {
		if _, err := strconv.Atoi(tok); err == nil {
			b.WriteString("[" + tok + "]")
			continue
		}
		b.WriteString("." + tok)
	}
	return b.String()
}
