package jobs

import (
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// checkSchemaCost bounds what validating a payload against sch can cost:
// it refuses a recursive $ref, more than MaxSchemaNodes subschemas once
// every $ref is followed (each schema counted once for every path that
// reaches it, as a validator may visit it once for each), and uniqueItems
// without a maxItems of at most MaxUniqueItems.
func checkSchemaCost(sch *jsonschema.Schema) error {
	w := costWalk{memo: map[*jsonschema.Schema]int{}, onPath: map[*jsonschema.Schema]bool{}}
	n, err := w.count(sch)
	if err != nil {
		return err
	}
	if n > MaxSchemaNodes {
		return fmt.Errorf("has %d subschemas once its $refs are followed; the limit is %d", n, MaxSchemaNodes)
	}
	return nil
}

type costWalk struct {
	memo   map[*jsonschema.Schema]int
	onPath map[*jsonschema.Schema]bool
}

var errTooManyNodes = fmt.Errorf("has more than %d subschemas once its $refs are followed", MaxSchemaNodes)

func (w *costWalk) count(s *jsonschema.Schema) (int, error) {
	if s == nil {
		return 0, nil
	}
	if n, ok := w.memo[s]; ok {
		return n, nil
	}
	if w.onPath[s] {
		return 0, fmt.Errorf("refers to itself through $ref at %s: recursive schemas are not accepted", schemaPointer(s))
	}
	if s.UniqueItems && (s.MaxItems == nil || *s.MaxItems > MaxUniqueItems) {
		return 0, fmt.Errorf("uses uniqueItems at %s without a maxItems of at most %d (checking uniqueness is quadratic in the array's length)",
			schemaPointer(s), MaxUniqueItems)
	}
	w.onPath[s] = true
	defer delete(w.onPath, s)
	total := 1
	for _, c := range children(s) {
		n, err := w.count(c)
		if err != nil {
			return 0, err
		}
		if total += n; total > MaxSchemaNodes {
			return 0, errTooManyNodes
		}
	}
	w.memo[s] = total
	return total, nil
}

// schemaPointer is where s is in the schema, as a JSON pointer ("#/...").
func schemaPointer(s *jsonschema.Schema) string {
	loc := s.Location
	for i := range len(loc) {
		if loc[i] == '#' {
			if loc[i:] == "#" {
				return "the top"
			}
			return loc[i:]
		}
	}
	return loc
}

// children lists the subschemas s applies, $ref targets included.
func children(s *jsonschema.Schema) []*jsonschema.Schema {
	out := []*jsonschema.Schema{s.Ref, s.RecursiveRef, s.Not, s.If, s.Then, s.Else, s.PropertyNames,
		s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema}
	if s.DynamicRef != nil {
		out = append(out, s.DynamicRef.Ref)
	}
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	out = append(out, s.PrefixItems...)
	for _, c := range s.Properties {
		out = append(out, c)
	}
	for _, c := range s.PatternProperties {
		out = append(out, c)
	}
	for _, c := range s.DependentSchemas {
		out = append(out, c)
	}
	for _, d := range s.Dependencies {
		if c, ok := d.(*jsonschema.Schema); ok {
			out = append(out, c)
		}
	}
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			out = append(out, v)
		case []*jsonschema.Schema:
			out = append(out, v...)
		}
	}
	return out
}
