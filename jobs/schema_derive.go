package jobs

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// SchemaProvider is implemented by handlers whose payloads have a JSON
// Schema: jobs.Typed's is derived from its argument type. A process
// stores its handlers' schemas with their types at start, so that every
// API process checks payloads against them.
type SchemaProvider interface {
	// PayloadSchema returns the schema of the handler's payloads.
	PayloadSchema() (json.RawMessage, error)
}

// ArgsSchema is implemented by argument types of typed handlers that give
// their payload schema themselves instead of having it derived.
type ArgsSchema interface {
	// JSONSchema returns the payload's JSON Schema.
	JSONSchema() json.RawMessage
}

// SchemaFor returns the JSON Schema of T's JSON form, as jobs.Typed
// decodes it: an object whose properties are T's exported fields (by
// their json names, embedded structs flattened) and no others, as unknown
// fields are refused. Nothing is required unless the field's jsonschema
// tag says so; the tag also takes minLength, maxLength, minimum, maximum,
// minItems, maxItems and enum (values split by |), comma-separated, and
// pattern, whose value runs to the end of the tag; a jsonschema_description
// tag describes the field:
//
//	Currency string `json:"currency" jsonschema:"required,minLength=3,maxLength=3"`
//
// A pointer, slice or map field also takes null (Go writes a nil one so),
// unless it is required.
// The schema is stricter than the decoder in two corners: it refuses null
// for other fields, and it matches field names exactly (the decoder also
// takes them in another case). A T (or *T) that implements ArgsSchema
// gives its own schema.
func SchemaFor[T any]() (json.RawMessage, error) {
	var zero T
	if s, ok := any(zero).(ArgsSchema); ok {
		return s.JSONSchema(), nil
	}
	if s, ok := any(&zero).(ArgsSchema); ok {
		return s.JSONSchema(), nil
	}
	d := deriver{visiting: map[reflect.Type]bool{}}
	sch, err := d.of(reflect.TypeFor[T]())
	if err != nil {
		return nil, err
	}
	sch = append(ordered{{"$schema", "https://json-schema.org/draft/2020-12/schema"}}, sch...)
	return json.Marshal(sch)
}

// ordered is a JSON object that keeps its keys in order, so a derived
// schema lists properties as the struct does (and forms show them so).
type ordered []kv

type kv struct {
	k string
	v any
}

// MarshalJSON writes the object's keys in order.
func (o ordered) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(e.k)
		v, err := json.Marshal(e.v)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

type deriver struct{ visiting map[reflect.Type]bool }

var (
	timeType        = reflect.TypeFor[time.Time]()
	rawType         = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textType        = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// of returns the schema of t's JSON form.
func (d deriver) of(t reflect.Type) (ordered, error) {
	switch {
	case t == timeType:
		return ordered{{"type", "string"}, {"format", "date-time"}}, nil
	case t == rawType || t.Kind() == reflect.Interface:
		return ordered{}, nil // any JSON value
	case reflect.PointerTo(t).Implements(unmarshalerType):
		return ordered{}, nil // decodes itself: any JSON value it takes
	case reflect.PointerTo(t).Implements(textType):
		return ordered{{"type", "string"}}, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return d.nullable(t.Elem())
	case reflect.Bool:
		return ordered{{"type", "boolean"}}, nil
	case reflect.String:
		return ordered{{"type", "string"}}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return ordered{{"type", "integer"}}, nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return ordered{{"type", "integer"}, {"minimum", 0}}, nil
	case reflect.Float32, reflect.Float64:
		return ordered{{"type", "number"}}, nil
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 && t.Kind() == reflect.Slice {
			return ordered{{"type", "string"}, {"contentEncoding", "base64"}}, nil
		}
		items, err := d.of(t.Elem())
		if err != nil {
			return nil, err
		}
		if t.Kind() == reflect.Slice { // a nil slice is written null
			return ordered{{"type", []string{"array", "null"}}, {"items", items}}, nil
		}
		return ordered{{"type", "array"}, {"items", items}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String && !reflect.PointerTo(t.Key()).Implements(textType) {
			return ordered{{"type", []string{"object", "null"}}}, nil
		}
		vals, err := d.of(t.Elem())
		if err != nil {
			return nil, err
		}
		return ordered{{"type", []string{"object", "null"}}, {"additionalProperties", vals}}, nil // a nil map is written null
	case reflect.Struct:
		return d.object(t)
	}
	return nil, fmt.Errorf("a %s has no JSON form", t)
}

// nullable returns the schema of t's JSON form or null (a pointer's).
func (d deriver) nullable(t reflect.Type) (ordered, error) {
	sch, err := d.of(t)
	if err != nil || len(sch) == 0 {
		return sch, err
	}
	for i, e := range sch {
		if e.k == "type" {
			if word, ok := e.v.(string); ok {
				sch[i].v = []string{word, "null"}
			}
			return sch, nil
		}
	}
	return sch, nil
}

// notNull takes null out of sch's types.
func notNull(sch ordered) {
	for i, e := range sch {
		if types, ok := e.v.([]string); ok && e.k == "type" && len(types) == 2 && types[1] == "null" {
			sch[i].v = types[0]
		}
	}
}

// object returns the schema of struct type t.
func (d deriver) object(t reflect.Type) (ordered, error) {
	if d.visiting[t] {
		return ordered{{"type", "object"}}, nil // recursive: not described further
	}
	d.visiting[t] = true
	defer delete(d.visiting, t)
	var props ordered
	var required []string
	if err := d.fields(t, &props, &required); err != nil {
		return nil, err
	}
	out := ordered{{"type", "object"}, {"properties", props}}
	if len(required) > 0 {
		out = append(out, kv{"required", required})
	}
	return append(out, kv{"additionalProperties", false}), nil
}

// fields adds t's fields to props (embedded structs' fields in place).
func (d deriver) fields(t reflect.Type, props *ordered, required *[]string) error {
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		ft := f.Type
		if f.Anonymous && name == "" {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if err := d.fields(ft, props, required); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		sch, err := d.of(ft)
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		req, err := applyTag(&sch, f.Tag.Get("jsonschema"))
		if err != nil {
			return fmt.Errorf("field %s: %w", f.Name, err)
		}
		if desc := f.Tag.Get("jsonschema_description"); desc != "" {
			sch = append(sch, kv{"description", desc})
		}
		if req {
			*required = append(*required, name)
			notNull(sch) // required: a value, not null
		}
		*props = append(*props, kv{name, sch})
	}
	return nil
}

// applyTag adds a jsonschema tag's keywords to sch and reports whether it
// marks the field required.
func applyTag(sch *ordered, tag string) (bool, error) {
	required := false
	for tag != "" {
		var part string
		if strings.HasPrefix(tag, "pattern=") {
			part, tag = tag, ""
		} else {
			part, tag, _ = strings.Cut(tag, ",")
		}
		key, val, _ := strings.Cut(part, "=")
		switch key {
		case "required":
			required = true
		case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return false, fmt.Errorf("jsonschema tag: %s=%q is not a count", key, val)
			}
			*sch = append(*sch, kv{key, n})
		case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
			n, err := strconv.ParseFloat(val, 64)
			if err != nil {
				return false, fmt.Errorf("jsonschema tag: %s=%q is not a number", key, val)
			}
			*sch = append(*sch, kv{key, json.Number(strconv.FormatFloat(n, 'g', -1, 64))})
		case "pattern", "format":
			*sch = append(*sch, kv{key, val})
		case "enum":
			*sch = append(*sch, kv{key, strings.Split(val, "|")})
		case "":
		default:
			return false, fmt.Errorf("jsonschema tag: unknown keyword %q", key)
		}
	}
	return required, nil
}

// PayloadSchema implements SchemaProvider: the schema of T's JSON form.
func (h typedHandler[T]) PayloadSchema() (json.RawMessage, error) { return SchemaFor[T]() }

// Schemas returns the payload schemas of the registered handlers that
// have one (SchemaProvider), by type.
func (r *Registry) Schemas() (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	for _, t := range r.Types() {
		h, _ := r.Lookup(t)
		p, ok := h.(SchemaProvider)
		if !ok {
			continue
		}
		s, err := p.PayloadSchema()
		if err != nil {
			return nil, fmt.Errorf("job type %s: payload schema: %w", t, err)
		}
		out[t] = s
	}
	return out, nil
}
