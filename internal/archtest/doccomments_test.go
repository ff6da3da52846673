package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestExportedIdentifiersDocumented holds every exported identifier of
// the module's importable packages to a doc comment: types, functions,
// methods of exported types, constants and variables. A doc comment on a
// parenthesized const, var or type group counts for its members, as does
// a member's own line comment inside a group. Left out: internal/
// packages, commands (package main: nothing imports them), test files,
// generated files, and other modules in the tree (examples/, bench/…).
func TestExportedIdentifiersDocumented(t *testing.T) {
	t.Parallel()
	var missing []string
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(path, rel, d.Name()) || rel == "internal" || strings.HasPrefix(rel, "internal/") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		missing = append(missing, undocumented(t, path, rel)...)
		return nil
	})
	require.NoError(t, err)
	for _, m := range missing {
		t.Error(m)
	}
}

// undocumented lists the exported identifiers of one Go file that have no
// doc comment, as "file:line: what".
func undocumented(t *testing.T, path, rel string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	require.NoError(t, err, "parse %s", rel)
	if ast.IsGenerated(f) || f.Name.Name == "main" {
		return nil
	}
	var out []string
	report := func(pos token.Pos, what string) {
		out = append(out, fmt.Sprintf("%s:%d: %s has no doc comment: say what it is for and what a caller must know, starting with its name", rel, fset.Position(pos).Line, what))
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() || d.Doc != nil {
				continue
			}
			if d.Recv == nil {
				report(d.Pos(), "func "+d.Name.Name)
			} else if recv := receiverTypeName(d.Recv.List[0].Type); ast.IsExported(recv) {
				report(d.Pos(), "method "+recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			grouped := d.Lparen.IsValid()
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() && d.Doc == nil && s.Doc == nil && (!grouped || s.Comment == nil) {
						report(s.Pos(), "type "+s.Name.Name)
					}
				case *ast.ValueSpec:
					if d.Doc != nil || s.Doc != nil || (grouped && s.Comment != nil) {
						continue
					}
					for _, n := range s.Names {
						if n.IsExported() {
							report(n.Pos(), d.Tok.String()+" "+n.Name)
						}
					}
				}
			}
		}
	}
	return out
}
