package archtest

import (
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// offDiagram are packages the Packages diagram of ARCHITECTURE.md leaves
// out, and why. The package table names them all the same.
var offDiagram = map[string]string{
	"db/dbtest":         "test helpers, imported by _test.go files only",
	"internal/syncbuf":  "a test helper, imported by _test.go files only",
	"internal/archtest": "tests of the docs, no code",
	"internal/e2e":      "end-to-end tests, no code",
	"bench/flintbench":  "a benchmark command, listed under the diagram with the test packages",
}

// docName is how ARCHITECTURE.md names a package of the module: its path
// inside the module, or main.go for the root (the flint command).
func docName(importPath string) string {
	if importPath == modulePath {
		return "main.go"
	}
	return strings.TrimPrefix(importPath, modulePath+"/")
}

// modulePackages lists the module's packages by their docName.
func modulePackages(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("go", "list", modulePath+"/...").Output()
	require.NoError(t, err)
	var names []string
	for _, p := range strings.Fields(string(out)) {
		names = append(names, docName(p))
	}
	slices.Sort(names)
	return names
}

// TestPackageTable holds ARCHITECTURE.md's package diagram and package
// table to the module's packages: the table has a row for each package and
// none for a package that does not exist, and the diagram draws every
// package but the few offDiagram lists.
func TestPackageTable(t *testing.T) {
	t.Parallel()
	pkgs := modulePackages(t)
	sec := section(t, readDoc(t, "ARCHITECTURE.md"), "## Packages")

	rows, at := firstTable(sec)
	require.NotEmpty(t, rows, "ARCHITECTURE.md's Packages section has no table")
	inTable := map[string]int{}
	for i, r := range rows {
		name := firstCodeSpan(r[0])
		if prev, dup := inTable[name]; dup {
			t.Errorf("ARCHITECTURE.md:%d: package %q has a second row (the first is on line %d)", at[i], name, prev)
		}
		inTable[name] = at[i]
		if !slices.Contains(pkgs, name) {
			t.Errorf("ARCHITECTURE.md:%d: the package table has a row for %q, which is no package of the module (go list %s/...): remove the row or fix its name", at[i], name, modulePath)
		}
	}
	for _, p := range pkgs {
		if _, ok := inTable[p]; !ok {
			t.Errorf("package %q has no row in ARCHITECTURE.md's package table: add one saying what it owns and what it must not do", p)
		}
	}

	diagram := firstCodeBlock(sec)
	require.NotEmpty(t, diagram, "ARCHITECTURE.md's Packages section has no diagram")
	var text strings.Builder
	for _, l := range diagram {
		text.WriteString(l.text + "\n")
	}
	for _, p := range pkgs {
		named := regexp.MustCompile(`(^|[^\w/.])` + regexp.QuoteMeta(p) + `($|[^\w/])`).MatchString(text.String())
		reason, off := offDiagram[p]
		switch {
		case !named && !off:
			t.Errorf("ARCHITECTURE.md's package diagram leaves out %q: draw it with the packages it imports and is imported by", p)
		case named && off:
			t.Errorf("ARCHITECTURE.md's package diagram draws %q, which offDiagram says it leaves out (%s): remove one or the other", p, reason)
		}
	}
	for p := range offDiagram {
		if !slices.Contains(pkgs, p) {
			t.Errorf("offDiagram names %q, which is no package of the module any more: remove it", p)
		}
	}
}
