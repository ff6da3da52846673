package archtest

import (
	"go/ast"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// routeSpan is a route written as code: "METHOD /path", the path perhaps
// with a query.
var routeSpan = regexp.MustCompile(`^(GET|HEAD|POST|PUT|PATCH|DELETE) (/\S*)$`)

// docRoute is a route a document names, and where.
type docRoute struct {
	doc    string
	line   int
	method string
	path   string
}

// documentedRoutes returns the routes named in code spans outside code
// blocks. In a table's first cell it also reads the shorthands the README
// uses: "`GET`, `PATCH /settings`" (one path, two methods) and
// "`POST /recurring/{id}/pause` · `/resume`" (a sibling path, the same
// method).
func documentedRoutes(t *testing.T, doc string) []docRoute {
	t.Helper()
	var out []docRoute
	inCode := false
	for _, l := range readDoc(t, doc) {
		if strings.HasPrefix(strings.TrimSpace(l.text), "```") {
			inCode = !inCode
			continue
		}
		if inCode {
			continue
		}
		text, firstCell := l.text, ""
		if strings.HasPrefix(text, "|") {
			cells := strings.Split(strings.Trim(text, "|"), "|")
			firstCell, text = cells[0], strings.Join(cells[1:], "|")
		}
		var methods []string
		var last docRoute
		for _, m := range codeSpan.FindAllStringSubmatch(firstCell, -1) {
			span := m[1]
			switch r := routeSpan.FindStringSubmatch(span); {
			case r != nil:
				last = docRoute{doc, l.n, r[1], r[2]}
				out = append(out, last)
				for _, method := range methods {
					out = append(out, docRoute{doc, l.n, method, r[2]})
				}
				methods = nil
			case routeSpan.MatchString(span + " /"):
				methods = append(methods, span)
			case strings.HasPrefix(span, "/") && last.path != "":
				out = append(out, docRoute{doc, l.n, last.method, last.path[:strings.LastIndex(last.path, "/")] + span})
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			if r := routeSpan.FindStringSubmatch(m[1]); r != nil {
				out = append(out, docRoute{doc, l.n, r[1], r[2]})
			}
		}
	}
	return out
}

// routeParam is a path parameter as Fiber (:id) or the docs ({id}) write it.
var routeParam = regexp.MustCompile(`:\w+|\{\w+\}`)

// routeKeyOf is a route as the route tables key it, with every parameter
// written ":" so that parameter names need not agree.
func routeKeyOf(method, path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	return method + " " + routeParam.ReplaceAllString(path, ":")
}

// handlerRoutes returns the keys of the handlers package's route tables,
// accessTable (the guarded routes) and publicRoutes, as routeKeyOf writes
// them.
func handlerRoutes(t *testing.T) map[string]bool {
	t.Helper()
	routes := map[string]bool{}
	tables := 0
	for _, f := range parseDir(t, filepath.Join(moduleRoot, "internal", "handlers")) {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.VAR {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if (name.Name != "accessTable" && name.Name != "publicRoutes") || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.CompositeLit)
					if !ok {
						continue
					}
					tables++
					for _, e := range lit.Elts {
						kv, ok := e.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						key, ok := kv.Key.(*ast.BasicLit)
						if !ok || key.Kind != token.STRING {
							t.Errorf("handlers.%s has a key that is not a string literal; this test reads the keys as written", name.Name)
							continue
						}
						s, err := strconv.Unquote(key.Value)
						require.NoError(t, err)
						method, path, _ := strings.Cut(s, " ")
						routes[routeKeyOf(method, path)] = true
					}
				}
			}
		}
	}
	require.Equal(t, 2, tables, "expected the handlers package to declare accessTable and publicRoutes as map literals; update this test if they moved or changed shape")
	return routes
}

// servedRoute reports whether a route of the tables matches method and
// path as Fiber would match a request: segment by segment, a parameter
// matching any value, so that a doc may name a route with an example
// value ("/api/v1/queues/hooks/push/rotate"). So a mistyped last segment
// can pass where a parameter stands ("GET /jobs/rowz" is "GET /jobs/:id");
// a wrong method, depth or literal segment elsewhere cannot.
func servedRoute(routes map[string]bool, method, path string) bool {
	want := strings.Split(strings.TrimPrefix(routeKeyOf(method, path), method+" "), "/")
	for key := range routes {
		m, p, _ := strings.Cut(key, " ")
		have := strings.Split(p, "/")
		if m != method || len(have) != len(want) {
			continue
		}
		match := true
		for i := range have {
			if have[i] != want[i] && have[i] != ":" {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// TestDocumentedRoutesExist checks every route README.md, ARCHITECTURE.md,
// CHANGELOG.md and the pages under docs/ name ("`POST /api/v1/jobs`", or "`POST /jobs`" in the
// API's tables, whose paths are under /api/v1) against the routes the
// handlers serve: accessTable, which every guarded route must be in, and
// publicRoutes.
func TestDocumentedRoutesExist(t *testing.T) {
	t.Parallel()
	routes := handlerRoutes(t)
	var checked int
	for _, doc := range docPages(t) {
		for _, r := range documentedRoutes(t, doc) {
			checked++
			if servedRoute(routes, r.method, r.path) || servedRoute(routes, r.method, "/api/v1"+r.path) {
				continue
			}
			t.Errorf("%s:%d names the route %s %s, which the handlers do not serve (no route of accessTable or publicRoutes matches it, with or without /api/v1): fix the doc, or the route", r.doc, r.line, r.method, r.path)
		}
	}
	require.Greater(t, checked, 20, "found hardly any routes in the docs; has the way they are written changed?")
}
