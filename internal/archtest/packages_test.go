package archtest

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// offDiagram are packages the Packages diagram of ARCHITECTURE.md leaves
// out, and why. The package table names them all the same.
var offDiagram = map[string]string{
	"internal/db/dbtest":         "test helpers, imported by _test.go files only",
	"internal/syncbuf":           "a test helper, imported by _test.go files only",
	"internal/jsonutil/jsontest": "a test helper, imported by _test.go files only",
	"internal/archtest":          "tests of the docs, no code",
	"internal/e2e":               "end-to-end tests, no code",
	"bench/flintbench":           "a benchmark command, listed under the diagram with the test packages",
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

// TestPackageTable holds ARCHITECTURE.md's package map and package
// table to the module's packages: the table has a row for each package and
// none for a package that does not exist, and the map has a line for every
// package but the few offDiagram lists, naming exactly the Flint packages
// its non-test code imports.
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

	checkImportMap(t, pkgs, firstCodeBlock(sec))
	for p := range offDiagram {
		if !slices.Contains(pkgs, p) {
			t.Errorf("offDiagram names %q, which is no package of the module any more: remove it", p)
		}
	}
}

// moduleImports maps each package of the module (by docName) to the
// module's packages its non-test code imports.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", modulePath+"/...").Output()
	require.NoError(t, err)
	m := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		var deps []string
		for _, imp := range f[1:] {
			if imp == modulePath || strings.HasPrefix(imp, modulePath+"/") {
				deps = append(deps, docName(imp))
			}
		}
		slices.Sort(deps)
		m[docName(f[0])] = deps
	}
	return m
}

// checkImportMap compares the map's lines ("pkg → dep dep …", or
// "pkg → (none)") with the real imports.
func checkImportMap(t *testing.T, pkgs []string, block []docLine) {
	t.Helper()
	require.NotEmpty(t, block, "ARCHITECTURE.md's Packages section has no import map")
	real := moduleImports(t)
	drawn := map[string]bool{}
	for _, l := range block {
		name, deps, ok := strings.Cut(l.text, "→")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			t.Errorf("ARCHITECTURE.md:%d: a line of the import map is \"package → imports\" (or \"→ (none)\"), not %q", l.n, l.text)
			continue
		}
		drawn[name] = true
		got := strings.Fields(deps)
		if len(got) == 1 && got[0] == "(none)" {
			got = nil
		}
		slices.Sort(got)
		want, exists := real[name]
		switch {
		case !exists:
			t.Errorf("ARCHITECTURE.md:%d: the import map draws %q, which is no package of the module", l.n, name)
		case !slices.Equal(got, want):
			t.Errorf("ARCHITECTURE.md:%d: the import map says %s imports %v; its code imports %v", l.n, name, got, want)
		}
	}
	for _, p := range pkgs {
		reason, off := offDiagram[p]
		switch {
		case !drawn[p] && !off:
			t.Errorf("ARCHITECTURE.md's import map leaves out %q: add a line with the Flint packages it imports", p)
		case drawn[p] && off:
			t.Errorf("ARCHITECTURE.md's import map draws %q, which offDiagram says it leaves out (%s): remove one or the other", p, reason)
		}
	}
}
