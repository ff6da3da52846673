package archtest

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// updateAPI rewrites api/flint.txt from the code: go test ./internal/archtest
// -run TestPublicAPI -update-api.
var updateAPI = flag.Bool("update-api", false, "rewrite api/flint.txt from the code")

// publicPackages are what a user of Flint as a library imports: the
// embedding API, the job and handler types, the generated HTTP client.
var publicPackages = []string{"app", "jobs", "client"}

// TestPublicAPI holds the exported surface of the public packages to
// api/flint.txt, one line per identifier with its signature (as Go's own
// api/ files do), so that a change to what users import is a deliberate,
// reviewed diff of that file.
func TestPublicAPI(t *testing.T) {
	root := moduleRoot
	var lines []string
	for _, pkg := range publicPackages {
		got, err := apiOf(filepath.Join(root, pkg), pkg)
		require.NoError(t, err)
		lines = append(lines, got...)
	}
	slices.Sort(lines)
	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join(root, "api", "flint.txt")
	if *updateAPI {
		require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run: go test ./internal/archtest -run TestPublicAPI -update-api")
	if string(want) != got {
		added, removed := lineDiff(string(want), got)
		t.Fatalf("the public API changed; if that is meant, run go test ./internal/archtest -run TestPublicAPI -update-api "+
			"and commit api/flint.txt\nadded:\n  %s\nremoved:\n  %s", strings.Join(added, "\n  "), strings.Join(removed, "\n  "))
	}
}

// lineDiff is the lines of b not in a (added) and of a not in b (removed).
func lineDiff(a, b string) (added, removed []string) {
	as, bs := strings.Split(a, "\n"), strings.Split(b, "\n")
	for _, l := range bs {
		if !slices.Contains(as, l) {
			added = append(added, l)
		}
	}
	for _, l := range as {
		if !slices.Contains(bs, l) {
			removed = append(removed, l)
		}
	}
	return added, removed
}

// apiOf lists the exported identifiers of the package in dir (its
// non-test files) as "pkg name, kind signature" lines.
func apiOf(dir, pkg string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			out = append(out, declAPI(fset, pkg, d)...)
		}
	}
	return out, nil
}

// declAPI is the API lines of one top-level declaration.
func declAPI(fset *token.FileSet, pkg string, d ast.Decl) []string {
	src := func(n any) string {
		var b bytes.Buffer
		_ = printer.Fprint(&b, fset, n)
		return strings.Join(strings.Fields(b.String()), " ")
	}
	line := func(format string, args ...any) string { return "pkg " + pkg + ", " + fmt.Sprintf(format, args...) }
	var out []string
	switch d := d.(type) {
	case *ast.FuncDecl:
		if !d.Name.IsExported() {
			return nil
		}
		if d.Recv == nil {
			return []string{line("func %s%s", d.Name.Name, strings.TrimPrefix(src(d.Type), "func"))}
		}
		recv := src(d.Recv.List[0].Type)
		if !ast.IsExported(strings.TrimLeft(strings.SplitN(recv, "[", 2)[0], "*")) {
			return nil
		}
		return []string{line("method (%s) %s%s", recv, d.Name.Name, strings.TrimPrefix(src(d.Type), "func"))}
	case *ast.GenDecl:
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.TypeSpec:
				out = append(out, typeAPI(pkg, s, src, line)...)
			case *ast.ValueSpec:
				for i, n := range s.Names {
					if !n.IsExported() {
						continue
					}
					l := line("%s %s", d.Tok, n.Name)
					if s.Type != nil {
						l += " " + src(s.Type)
					}
					if d.Tok == token.CONST && i < len(s.Values) {
						l += " = " + src(s.Values[i])
					}
					out = append(out, l)
				}
			}
		}
	}
	return out
}

// typeAPI is the lines of an exported type: itself, and its exported
// fields or interface methods.
func typeAPI(pkg string, s *ast.TypeSpec, src func(any) string, line func(string, ...any) string) []string {
	if !s.Name.IsExported() {
		return nil
	}
	name := s.Name.Name
	if s.TypeParams != nil {
		name += src(s.TypeParams)
	}
	switch t := s.Type.(type) {
	case *ast.StructType:
		out := []string{line("type %s struct", name)}
		for _, f := range t.Fields.List {
			if len(f.Names) == 0 { // embedded
				out = append(out, line("type %s struct, embedded %s", s.Name.Name, src(f.Type)))
			}
			for _, n := range f.Names {
				if n.IsExported() {
					out = append(out, line("type %s struct, %s %s", s.Name.Name, n.Name, src(f.Type)))
				}
			}
		}
		return out
	case *ast.InterfaceType:
		out := []string{line("type %s interface", name)}
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if n.IsExported() {
					out = append(out, line("type %s interface, %s%s", s.Name.Name, n.Name, strings.TrimPrefix(src(m.Type), "func")))
				}
			}
			if len(m.Names) == 0 {
				out = append(out, line("type %s interface, embedded %s", s.Name.Name, src(m.Type)))
			}
		}
		return out
	}
	if s.Assign.IsValid() {
		return []string{line("type %s = %s", name, src(s.Type))}
	}
	return []string{line("type %s %s", name, src(s.Type))}
}
