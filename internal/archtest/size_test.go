package archtest

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The size limits of hand-written code: a function from its func line to
// its closing brace (a function literal counted on its own as well), and
// a file as wc -l counts it.
const (
	maxFuncLines = 80
	maxFileLines = 400
)

// longMarker excuses one file or function from the limits, with a reason
// on the same line. In a Go file it is a line of its own: directly above
// the package clause for the file; for a function, the last line of its
// doc comment, directly above func (for a function literal, the line
// directly above the one its func keyword is on). In the other files the
// size rule covers, it is a comment in the file's own syntax within its
// first five lines.
const longMarker = "flint:long"

// markerLine matches a marker at the start of a Go comment line and keeps
// what follows it, which must be a space and the reason.
var markerLine = regexp.MustCompile(`^//` + longMarker + `(.*)$`)

// sizeFinding is one thing the size rule found wrong.
type sizeFinding struct {
	path string
	line int
	msg  string
}

// TestSizeLimits holds hand-written code to maxFuncLines per function and
// maxFileLines per file, unless a longMarker gives the reason. Generated
// Go (*_templ.go, *.gen.go, and any file with the "Code generated ... DO
// NOT EDIT." header) is exempt, as are other modules in the tree
// (examples/, bench/riverbench, tools/), vendored files and testdata. Besides
// Go, the rule covers templ files, static/*.js and static/*.css, scripts/*
// and clients/python/*.py. A marker without a reason, one that excuses
// nothing, and one on code within the limits all fail too.
func TestSizeLimits(t *testing.T) {
	t.Parallel()
	var findings []sizeFinding
	for _, path := range sizeRuleFiles(t) {
		rel, err := filepath.Rel(moduleRoot, path)
		require.NoError(t, err)
		src, err := os.ReadFile(path)
		require.NoError(t, err)
		if strings.HasSuffix(path, ".go") {
			findings = append(findings, checkGoSize(t, rel, src)...)
		} else {
			findings = append(findings, checkOtherSize(rel, src)...)
		}
	}
	slices.SortFunc(findings, func(a, b sizeFinding) int {
		return strings.Compare(fmt.Sprintf("%s:%09d", a.path, a.line), fmt.Sprintf("%s:%09d", b.path, b.line))
	})
	for _, f := range findings {
		t.Errorf("%s:%d: %s", f.path, f.line, f.msg)
	}
}

// sizeRuleFiles lists the files the size rule covers.
func sizeRuleFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(moduleRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(moduleRoot, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if skipDir(path, rel, d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		dir, name := filepath.ToSlash(filepath.Dir(rel)), d.Name()
		switch {
		case strings.HasSuffix(name, ".go"):
			if !strings.HasSuffix(name, "_templ.go") && !strings.HasSuffix(name, ".gen.go") {
				files = append(files, path)
			}
		case strings.HasSuffix(name, ".templ"),
			dir == "static" && (strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".css")),
			dir == "scripts",
			dir == "clients/python" && strings.HasSuffix(name, ".py"):
			files = append(files, path)
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// skipDir reports whether a directory of the tree is outside the module's
// hand-written code: hidden directories, build output, vendored code,
// test fixtures, and nested modules (a directory with its own go.mod).
func skipDir(path, rel, name string) bool {
	if rel == "." {
		return false
	}
	if strings.HasPrefix(name, ".") || name == "bin" || name == "node_modules" || name == "vendor" || name == "testdata" {
		return true
	}
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

// lineCount counts lines as wc -l does.
func lineCount(src []byte) int { return bytes.Count(src, []byte("\n")) }

// checkGoSize applies the size rule to one Go file.
func checkGoSize(t *testing.T, rel string, src []byte) []sizeFinding {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments)
	require.NoError(t, err, "parse %s", rel)
	if ast.IsGenerated(f) {
		return nil
	}
	var out []sizeFinding
	lines := strings.Split(string(src), "\n")
	used := map[int]bool{} // lines of markers that excuse something
	// marker checks the line above a file's package clause or a function's
	// func line: whether it holds a marker, and whether that marker gives
	// a reason.
	marker := func(funcLine int) (found bool) {
		above := funcLine - 1
		if above < 1 {
			return false
		}
		m := markerLine.FindStringSubmatch(strings.TrimSpace(lines[above-1]))
		if m == nil {
			return false
		}
		used[above] = true
		if !strings.HasPrefix(m[1], " ") || strings.TrimSpace(m[1]) == "" {
			out = append(out, sizeFinding{rel, above, "//" + longMarker + " needs a reason on the same line: //" + longMarker + " <why this reads better long>"})
		}
		return true
	}

	pkgLine := fset.Position(f.Package).Line
	n := lineCount(src)
	switch excused := marker(pkgLine); {
	case n > maxFileLines && !excused:
		out = append(out, sizeFinding{rel, 1, fmt.Sprintf("file is %d lines, over %d: split it by concern, or put //%s <reason> directly above the package clause", n, maxFileLines, longMarker)})
	case n <= maxFileLines && excused:
		out = append(out, sizeFinding{rel, pkgLine - 1, fmt.Sprintf("file is %d lines, within %d: remove its //%s marker", n, maxFileLines, longMarker)})
	}

	ast.Inspect(f, func(node ast.Node) bool {
		var name string
		var body *ast.BlockStmt
		switch fn := node.(type) {
		case *ast.FuncDecl:
			name, body = fn.Name.Name, fn.Body
		case *ast.FuncLit:
			name, body = "function literal", fn.Body
		}
		if body == nil {
			return true
		}
		start := fset.Position(node.Pos()).Line
		length := fset.Position(body.End()).Line - start + 1
		switch excused := marker(start); {
		case length > maxFuncLines && !excused:
			excuse := "end its doc comment with //" + longMarker + " <reason>"
			if _, lit := node.(*ast.FuncLit); lit {
				excuse = "put //" + longMarker + " <reason> on the line above it"
			}
			out = append(out, sizeFinding{rel, start, fmt.Sprintf("%s is %d lines, over %d: split it into helpers with good names, or %s", name, length, maxFuncLines, excuse)})
		case length <= maxFuncLines && excused:
			out = append(out, sizeFinding{rel, start - 1, fmt.Sprintf("%s is %d lines, within %d: remove its //%s marker", name, length, maxFuncLines, longMarker)})
		}
		return true
	})

	for _, cg := range f.Comments {
		for _, c := range cg.List {
			line := fset.Position(c.Pos()).Line
			if markerLine.MatchString(c.Text) && !used[line] {
				out = append(out, sizeFinding{rel, line, "//" + longMarker + " excuses nothing here: it belongs directly above the package clause or, as the last line of a doc comment, directly above func"})
			}
		}
	}
	return out
}

// otherMarker matches a marker in a comment of any syntax (#, //, /*,
// <!--), keeping what follows it.
var otherMarker = regexp.MustCompile(longMarker + `(.*)$`)

// checkOtherSize applies the file size rule to a file that is not Go.
func checkOtherSize(rel string, src []byte) []sizeFinding {
	lines := strings.Split(string(src), "\n")
	excused, at := false, 0
	var out []sizeFinding
	for i, l := range lines[:min(5, len(lines))] {
		m := otherMarker.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		excused, at = true, i+1
		reason := strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(m[1]), "*/"), "-->"))
		if !strings.HasPrefix(m[1], " ") || reason == "" {
			out = append(out, sizeFinding{rel, at, longMarker + " needs a reason on the same line: " + longMarker + " <why this reads better long>"})
		}
	}
	switch n := lineCount(src); {
	case n > maxFileLines && !excused:
		out = append(out, sizeFinding{rel, 1, fmt.Sprintf("file is %d lines, over %d: split it, or give the reason in a comment with %s <reason> within its first 5 lines", n, maxFileLines, longMarker)})
	case n <= maxFileLines && excused:
		out = append(out, sizeFinding{rel, at, fmt.Sprintf("file is %d lines, within %d: remove its %s marker", n, maxFileLines, longMarker)})
	}
	return out
}
