package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

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

// timeUnits are the time package's durations a default may be written in.
var timeUnits = map[string]time.Duration{"Millisecond": time.Millisecond, "Second": time.Second, "Minute": time.Minute, "Hour": time.Hour}

// durationOf evaluates a default written as time.Unit or N*time.Unit.
func durationOf(e ast.Expr) (time.Duration, bool) {
	switch x := e.(type) {
	case *ast.SelectorExpr:
		d, ok := timeUnits[x.Sel.Name]
		return d, ok
	case *ast.BinaryExpr:
		lit, ok := x.X.(*ast.BasicLit)
		if !ok || x.Op != token.MUL {
			return 0, false
		}
		n, err := strconv.Atoi(strings.ReplaceAll(lit.Value, "_", ""))
		d, ok := durationOf(x.Y)
		return time.Duration(n) * d, ok && err == nil
	}
	return 0, false
}

// loopIntervals returns, for each scheduler loop, the default intervals its
// constructor sets (cfg.XInterval = cmp.Or(cfg.XInterval, d)), in source
// order.
func loopIntervals(t *testing.T) map[string][]time.Duration {
	t.Helper()
	out := map[string][]time.Duration{}
	for _, f := range parseDir(t, filepath.Join(moduleRoot, "internal", "scheduler")) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "New") || fn.Body == nil {
				continue
			}
			loop := strings.TrimPrefix(fn.Name.Name, "New")
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				as, ok := n.(*ast.AssignStmt)
				if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
					return true
				}
				lhs, ok := as.Lhs[0].(*ast.SelectorExpr)
				call, isCall := as.Rhs[0].(*ast.CallExpr)
				if !ok || !isCall || !strings.HasSuffix(lhs.Sel.Name, "Interval") || len(call.Args) != 2 {
					return true
				}
				if dur, ok := durationOf(call.Args[1]); ok {
					out[loop] = append(out[loop], dur)
				}
				return true
			})
		}
	}
	return out
}

// tableDuration matches a duration as the loop table writes it: "5 s",
// "1 min", "10 min", "500 ms", "1 h".
var tableDuration = regexp.MustCompile(`(\d+)\s*(ms|s|min|h)\b`)

// TestSchedulerLoopIntervals holds the default column of ARCHITECTURE.md's
// loop table to the code: the durations a row names are, in order, the
// default intervals its loop's constructor sets.
func TestSchedulerLoopIntervals(t *testing.T) {
	t.Parallel()
	code := loopIntervals(t)
	rows, at := firstTable(section(t, readDoc(t, "ARCHITECTURE.md"), "## Time-based work: the scheduler"))
	units := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "min": time.Minute, "h": time.Hour}
	for i, r := range rows {
		name := firstCodeSpan(r[0])
		var doc []time.Duration
		for _, m := range tableDuration.FindAllStringSubmatch(r[1], -1) {
			n, _ := strconv.Atoi(m[1])
			doc = append(doc, time.Duration(n)*units[m[2]])
		}
		if !slices.Equal(doc, code[name]) {
			t.Errorf("ARCHITECTURE.md:%d: the loop table gives %s the intervals %v; its constructor's defaults are %v (cfg.…Interval = cmp.Or(…)): fix the row or the code", at[i], name, doc, code[name])
		}
	}
}
