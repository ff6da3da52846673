package views

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Kinds of a payload field in the create form (SchemaField.Kind).
const (
	FieldString  = "string"
	FieldInteger = "integer"
	FieldNumber  = "number"
	FieldBoolean = "boolean"
	FieldEnum    = "enum"
	FieldJSON    = "json" // an object, an array, or anything the schema leaves open: typed as JSON
)

// SchemaField is one top-level property of a payload schema, as the
// create form offers it and a type's page lists it.
type SchemaField struct {
	Name        string
	Kind        string   // FieldString, FieldInteger, ...
	Type        string   // the schema's own word for it ("array of object", "string")
	Required    bool     // listed in the schema's required
	Description string   // the schema's description or title
	Enum        []string // the choices of a FieldEnum
	Value       string   // as typed into the form
	Error       string   // what was refused
}

// InputName is the form field that carries the value.
func (f SchemaField) InputName() string { return "pf." + f.Name }

// InputID is the id of the form control.
func (f SchemaField) InputID() string { return "pf-" + f.Name }

// maxFormFields caps the fields a form offers: a schema with more is
// written as JSON.
const maxFormFields = 60

// SchemaFields reads the top-level properties of a payload schema, in the
// schema's order. Nil when the schema has no properties to offer.
func SchemaFields(schema json.RawMessage) []SchemaField {
	var top struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	if json.Unmarshal(schema, &top) != nil || len(top.Properties) == 0 {
		return nil
	}
	names, props := orderedKeys(top.Properties)
	if len(names) > maxFormFields {
		return nil
	}
	out := make([]SchemaField, 0, len(names))
	for i, n := range names {
		f := describeField(props[i])
		f.Name, f.Required = n, slices.Contains(top.Required, n)
		out = append(out, f)
	}
	return out
}

// orderedKeys returns an object's keys and values in the order written.
func orderedKeys(obj json.RawMessage) ([]string, []json.RawMessage) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil
	}
	var names []string
	var vals []json.RawMessage
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil
		}
		names, vals = append(names, name), append(vals, v)
	}
	return names, vals
}

// describeField reads one property's schema.
func describeField(raw json.RawMessage) SchemaField {
	var p struct {
		Type        json.RawMessage   `json:"type"`
		Enum        []json.RawMessage `json:"enum"`
		Items       json.RawMessage   `json:"items"`
		Description string            `json:"description"`
		Title       string            `json:"title"`
		Ref         string            `json:"$ref"`
	}
	f := SchemaField{Kind: FieldJSON, Type: "any JSON"}
	if json.Unmarshal(raw, &p) != nil {
		return f
	}
	f.Description = strings.TrimSpace(p.Description)
	if f.Description == "" {
		f.Description = strings.TrimSpace(p.Title)
	}
	if len(p.Enum) > 0 {
		var choices []string
		for _, e := range p.Enum {
			var s string
			if json.Unmarshal(e, &s) != nil {
				return f // choices that are not all strings: typed as JSON
			}
			choices = append(choices, s)
		}
		f.Kind, f.Type, f.Enum = FieldEnum, "one of "+strings.Join(choices, ", "), choices
		return f
	}
	t := schemaType(p.Type)
	switch t {
	case "string", "integer", "number", "boolean":
		f.Kind, f.Type = t, t
	case "array":
		f.Type = "array"
		if it := describeField(p.Items); p.Items != nil && it.Type != "any JSON" {
			f.Type = "array of " + it.Type
		}
	case "object":
		f.Type = "object"
	}
	return f
}

// schemaType reads a "type" keyword: a word, or a list of which the first
// that is not "null" counts.
func schemaType(raw json.RawMessage) string {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		for _, t := range many {
			if t != "null" {
				return t
			}
		}
	}
	return ""
}

// FieldValue converts what was typed into field f into its JSON value.
func (f SchemaField) FieldValue(typed string) (json.RawMessage, error) {
	typed = strings.TrimSpace(typed)
	switch f.Kind {
	case FieldString, FieldEnum:
		return json.Marshal(typed)
	case FieldBoolean:
		if typed != "true" && typed != "false" {
			return nil, fmt.Errorf("choose true or false")
		}
		return json.RawMessage(typed), nil
	case FieldInteger, FieldNumber:
		var n json.Number
		if err := json.Unmarshal([]byte(typed), &n); err != nil {
			return nil, fmt.Errorf("must be a number")
		}
		return json.RawMessage(n.String()), nil
	default:
		if !json.Valid([]byte(typed)) {
			return nil, fmt.Errorf("must be JSON, such as [1, 2] or {\"a\": 1}")
		}
		return json.RawMessage(typed), nil
	}
}

// SchemaChange says how a version of a schema differs from the one
// before it, in its top-level fields.
type SchemaChange struct {
	Added, Removed, NowRequired, NoLongerRequired []string
	Other                                         bool // changed within the fields, or elsewhere
}

// DiffSchemas compares two versions of a schema's top-level fields.
func DiffSchemas(before, after json.RawMessage) SchemaChange {
	var c SchemaChange
	b, a := SchemaFields(before), SchemaFields(after)
	find := func(fs []SchemaField, n string) (SchemaField, bool) {
		for _, f := range fs {
			if f.Name == n {
				return f, true
			}
		}
		return SchemaField{}, false
	}
	for _, f := range a {
		old, ok := find(b, f.Name)
		switch {
		case !ok:
			c.Added = append(c.Added, f.Name)
		case f.Required && !old.Required:
			c.NowRequired = append(c.NowRequired, f.Name)
		case !f.Required && old.Required:
			c.NoLongerRequired = append(c.NoLongerRequired, f.Name)
		}
	}
	for _, f := range b {
		if _, ok := find(a, f.Name); !ok {
			c.Removed = append(c.Removed, f.Name)
		}
	}
	c.Other = len(c.Added)+len(c.Removed)+len(c.NowRequired)+len(c.NoLongerRequired) == 0
	return c
}
