package handlers

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"sort"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/views"
)

// openAPI is the API's OpenAPI 3 document. It is written by hand and kept
// honest by a test that compares it with the routes the server really has.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the document.
func OpenAPI() []byte { return openAPI }

// apiDocs is the document parsed once for the docs page.
var apiDocs = parseDocs(openAPI)

func parseDocs(raw []byte) []views.DocOperation {
	var doc struct {
		Paths map[string]map[string]struct {
			Summary     string `json:"summary"`
			Description string `json:"description"`
			Tags        []string
			Security    *[]any `json:"security"`
			Parameters  []struct {
				Name, In, Description string
				Required              bool
			} `json:"parameters"`
			RequestBody *struct {
				Content map[string]struct {
					Schema json.RawMessage `json:"schema"`
				} `json:"content"`
			} `json:"requestBody"`
			Responses map[string]struct {
				Description string `json:"description"`
			} `json:"responses"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		panic("handlers: openapi.json is not valid JSON: " + err.Error())
	}
	var out []views.DocOperation
	for path, methods := range doc.Paths {
		for method, op := range methods {
			d := views.DocOperation{Method: strings.ToUpper(method), Path: path, Summary: op.Summary,
				Description: op.Description, Public: op.Security != nil && len(*op.Security) == 0}
			if len(op.Tags) > 0 {
				d.Tag = op.Tags[0]
			}
			for _, p := range op.Parameters {
				d.Params = append(d.Params, views.DocParam{Name: p.Name, In: p.In, Description: p.Description, Required: p.Required})
			}
			if op.RequestBody != nil {
				if c, ok := op.RequestBody.Content["application/json"]; ok {
					var pretty map[string]any
					_ = json.Unmarshal(c.Schema, &pretty)
					b, _ := json.MarshalIndent(pretty, "", "  ")
					d.Body = string(b)
				}
			}
			for code, r := range op.Responses {
				d.Responses = append(d.Responses, views.DocResponse{Code: code, Description: r.Description})
			}
			sort.Slice(d.Responses, func(i, j int) bool { return d.Responses[i].Code < d.Responses[j].Code })
			out = append(out, d)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return out[i].Method < out[j].Method
	})
	return out
}

// openAPIJSON handles GET /api/v1/openapi.json.
func (s *server) openAPIJSON(c *fiber.Ctx) error {
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
	return c.Send(openAPI)
}

// apiDocsPage handles GET /api/v1/docs: the document as a readable page.
func (s *server) apiDocsPage(c *fiber.Ctx) error {
	return render(c, http.StatusOK, views.APIDocs(apiDocs))
}
