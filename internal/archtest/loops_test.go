package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// schedulerLoops returns the loops app starts: the exported types of the
// scheduler package with a method Run(context.Context) error whose
// constructor (scheduler.NewT) app's code calls. Types with such a Run
// method that app never builds come back in unstarted.
func schedulerLoops(t *testing.T) (started, unstarted []string) {
	t.Helper()
	var runners []string
	for _, f := range parseDir(t, filepath.Join(moduleRoot, "internal", "scheduler")) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || fn.Name.Name != "Run" || !isRunSignature(fn.Type) {
				continue
			}
			if recv := receiverTypeName(fn.Recv.List[0].Type); ast.IsExported(recv) {
				runners = append(runners, recv)
			}
		}
	}
	built := map[string]bool{}
	for _, f := range parseDir(t, filepath.Join(moduleRoot, "app")) {
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "scheduler" && strings.HasPrefix(sel.Sel.Name, "New") {
					built[strings.TrimPrefix(sel.Sel.Name, "New")] = true
				}
			}
			return true
		})
	}
	for _, r := range runners {
		if built[r] {
			started = append(started, r)
		} else {
			unstarted = append(unstarted, r)
		}
	}
	slices.Sort(started)
	return started, unstarted
}

// isRunSignature reports whether ft is func(context.Context) error.
func isRunSignature(ft *ast.FuncType) bool {
	if ft.Params.NumFields() != 1 || ft.Results.NumFields() != 1 {
		return false
	}
	p, ok := ft.Params.List[0].Type.(*ast.SelectorExpr)
	r, rok := ft.Results.List[0].Type.(*ast.Ident)
	return ok && rok && p.Sel.Name == "Context" && r.Name == "error"
}

// receiverTypeName is the type name of a method's receiver: T, *T, T[P]
// or *T[P].
func receiverTypeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// parseDir parses the non-test Go files of one directory, with comments.
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var files []*ast.File
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, e.Name()), nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	return files
}

// TestSchedulerLoopTable holds the loop table of ARCHITECTURE.md ("Time-
// based work: the scheduler") and the list in the scheduler package's doc
// comment to the loops app starts in a scheduler process.
func TestSchedulerLoopTable(t *testing.T) {
	t.Parallel()
	started, unstarted := schedulerLoops(t)
	require.NotEmpty(t, started, "found no scheduler loops: a loop is an exported scheduler type with Run(context.Context) error that app builds with scheduler.NewT")
	for _, u := range unstarted {
		t.Errorf("scheduler.%s has Run(context.Context) error, but app never builds it (scheduler.New%s): start it with the other loops, or drop its Run", u, u)
	}

	rows, at := firstTable(section(t, readDoc(t, "ARCHITECTURE.md"), "## Time-based work: the scheduler"))
	var inTable []string
	for i, r := range rows {
		name := firstCodeSpan(r[0])
		inTable = append(inTable, name)
		if !slices.Contains(started, name) {
			t.Errorf("ARCHITECTURE.md:%d: the loop table lists %q, which app does not start: remove the row or fix its name (loops started: %s)", at[i], name, strings.Join(started, ", "))
		}
	}
	for _, l := range started {
		if !slices.Contains(inTable, l) {
			t.Errorf("app starts scheduler.%s, which ARCHITECTURE.md's loop table (Time-based work: the scheduler) leaves out: add a row with its default interval and what it does", l)
		}
	}

	// The package doc lists the loops as an indented block, a loop's name
	// first on its line ("//\tPromoter   scheduled → queued ...").
	doc, err := os.ReadFile(filepath.Join(moduleRoot, "internal", "scheduler", "doc.go"))
	require.NoError(t, err)
	listed := regexp.MustCompile(`(?m)^//\t([A-Z]\w*)(\s{2,}|$)`).FindAllStringSubmatch(string(doc), -1)
	var inDoc []string
	for _, m := range listed {
		inDoc = append(inDoc, m[1])
		if !slices.Contains(started, m[1]) {
			t.Errorf("internal/scheduler/doc.go lists the loop %q, which app does not start: remove it or fix its name", m[1])
		}
	}
	for _, l := range started {
		if !slices.Contains(inDoc, l) {
			t.Errorf("app starts scheduler.%s, which the loop list in scheduler/doc.go leaves out: add it", l)
		}
	}
}
