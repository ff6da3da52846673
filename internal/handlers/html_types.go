package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// typeRecentJobs is how many of a type's latest jobs its page lists.
const typeRecentJobs = 20

// typePage handles GET /types/:type: the type's schema, versions, workers
// and recent jobs.
func (s *server) typePage(c *fiber.Ctx) error {
	t, err := typeParam(c)
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	ti, err := s.loadTypeInfo(ctx, t)
	if err != nil {
		return err
	}
	page, err := s.jobStore.ListJobs(ctx, domain.ListParams{Type: t, Limit: typeRecentJobs})
	if err != nil {
		return err
	}
	p := views.TypePage{Type: t, Known: ti.Known, Versions: ti.Versions, Workers: ti.Workers, Jobs: page.Jobs}
	if len(ti.Schema) > 0 {
		p.Fields = views.SchemaFields(ti.Schema)
		p.Schema = views.PrettyJSON(ti.Schema)
	}
	return render(c, http.StatusOK, views.TypeView(s.chrome(c, t, "workers", false), p))
}

// schemaOf returns the payload schema in force for jobType, if any.
func (s *server) schemaOf(ctx context.Context, jobType string) *jobs.PayloadSchema {
	if !jobs.ValidType(jobType) {
		return nil
	}
	s.types.Prepare(ctx, jobType, "")
	if src, ok := s.types.(jobs.SchemaSource); ok {
		return src.Schema(jobType)
	}
	return nil
}

// withSchemaFields gives the create form the fields of its type's schema,
// with what was typed into them (form, when not nil).
func (s *server) withSchemaFields(ctx context.Context, f *views.CreateForm, form func(string) string) {
	t := f.Value("type")
	f.Schema, f.SchemaOf = nil, t
	sch := s.schemaOf(ctx, t)
	if sch == nil {
		return
	}
	f.Schema = views.SchemaFields(sch.Text)
	if form != nil {
		for i := range f.Schema {
			f.Schema[i].Value = form(f.Schema[i].InputName())
		}
	}
}

// schemaFieldsPartial handles GET /jobs/new/fields?type=: the create
// form's payload fields for the type chosen.
func (s *server) schemaFieldsPartial(c *fiber.Ctx) error {
	f := views.CreateForm{Values: map[string]string{"type": c.Query("type")}}
	s.withSchemaFields(c.UserContext(), &f, nil)
	return render(c, http.StatusOK, views.SchemaFieldsPartial(f))
}

// composePayload sets the schema fields filled in on the form into the
// raw JSON payload (an object, or empty). A field it cannot read gets its
// error and the payload is "".
func composePayload(f *views.CreateForm) (string, bool) {
	raw := strings.TrimSpace(f.Value("payload"))
	filled := slices.ContainsFunc(f.Schema, func(sf views.SchemaField) bool { return strings.TrimSpace(sf.Value) != "" })
	if !filled {
		return raw, true
	}
	obj := map[string]json.RawMessage{}
	if raw != "" && raw != "null" {
		d := json.NewDecoder(bytes.NewReader([]byte(raw)))
		d.UseNumber()
		if err := d.Decode(&obj); err != nil || obj == nil {
			f.Errors["payload"] = "must be a JSON object (or empty) when fields above are filled in"
			return "", false
		}
	}
	ok := true
	for i, sf := range f.Schema {
		if strings.TrimSpace(sf.Value) == "" {
			continue
		}
		v, err := sf.FieldValue(sf.Value)
		if err != nil {
			f.Schema[i].Error, ok = err.Error(), false
			continue
		}
		obj[sf.Name] = v
	}
	if !ok {
		return "", false
	}
	out, err := json.Marshal(obj)
	if err != nil {
		f.Errors["payload"] = "cannot be written as JSON"
		return "", false
	}
	return string(out), true
}

// schemaFieldError shows an error on a payload field (payload.name...)
// next to the schema field that has that name, if the form has it.
func schemaFieldError(f *views.CreateForm, field, msg string) bool {
	rest, ok := strings.CutPrefix(field, "payload.")
	if !ok {
		return false
	}
	name := rest
	if i := strings.IndexAny(rest, ".["); i >= 0 {
		name = rest[:i]
	}
	for i := range f.Schema {
		if f.Schema[i].Name == name {
			if name != rest {
				msg = rest + ": " + msg
			}
			f.Schema[i].Error = msg
			return true
		}
	}
	return false
}
