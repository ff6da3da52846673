package archtest

import (
	"go/ast"
	"go/token"

	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
)

// envReaders are the functions and methods whose first argument, a string
// literal, names an environment variable Flint reads: the configuration
// reader's methods (app/config_read.go), os.Getenv and os.LookupEnv, and
// the getenv functions handed around for tests.
var envReaders = []string{"str", "int", "dur", "Getenv", "LookupEnv", "getenv"}

// envNotConfiguration are variables the code reads that configure nothing
// of Flint's, and why the configuration page leaves them out.
var envNotConfiguration = map[string]string{
	"USER":                               "who ran flint users, for the audit trail",
	"LOGNAME":                            "who ran flint users, for the audit trail",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "one of the other OTEL_* variables the page names as a group",
	"OTEL_TRACES_EXPORTER":               "one of the other OTEL_* variables the page names as a group",
}

// envReadElsewhere are variables the configuration page documents that a
// library reads, not Flint's own code.
var envReadElsewhere = map[string]string{
	"OTEL_TRACES_SAMPLER": "the OpenTelemetry SDK reads it",
}

// envRead lists the environment variables the non-test code of app, jobs,
// the flint command and the internal packages (but the tests' helpers)
// reads by name.
func envRead(t *testing.T) []string {
	t.Helper()
	dirs := []string{"app", "jobs", "."}
	internal, err := filepath.Glob(filepath.Join(moduleRoot, "internal", "*"))
	require.NoError(t, err)
	for _, d := range internal {
		switch filepath.Base(d) {
		case "e2e", "archtest", "syncbuf":
			continue
		}
		dirs = append(dirs, filepath.Join("internal", filepath.Base(d)))
	}
	found := map[string]bool{}
	for _, d := range dirs {
		for _, f := range parseDir(t, filepath.Join(moduleRoot, d)) {
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				name := ""
				switch fn := call.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				lit, ok := call.Args[0].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING || !slices.Contains(envReaders, name) {
					return true
				}
				if v, err := strconv.Unquote(lit.Value); err == nil && regexp.MustCompile(`^[A-Z][A-Z0-9_]+$`).MatchString(v) {
					found[v] = true
				}
				return true
			})
		}
	}
	var out []string
	for v := range found {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// TestConfigurationPage holds docs/configuration.md to the code: its table
// of environment variables names exactly the variables the code reads (but
// envNotConfiguration), and its table of runtime settings names exactly
// domain.Settings' fields, each with the default domain.DefaultSettings gives.
func TestConfigurationPage(t *testing.T) {
	t.Parallel()
	page := readDoc(t, filepath.Join("docs", "configuration.md"))
	rows, at := firstTable(page)
	require.NotEmpty(t, rows, "docs/configuration.md has no table of environment variables")
	documented := map[string]int{}
	span := regexp.MustCompile("`([A-Z][A-Z0-9_]+)`")
	for i, r := range rows {
		for _, m := range span.FindAllStringSubmatch(r[0], -1) {
			documented[m[1]] = at[i]
		}
	}
	read := envRead(t)
	for _, v := range read {
		if _, ok := documented[v]; !ok && envNotConfiguration[v] == "" {
			t.Errorf("the code reads %s, which docs/configuration.md's table leaves out: add a row (meaning, default)", v)
		}
	}
	for v, line := range documented {
		if !slices.Contains(read, v) && envReadElsewhere[v] == "" {
			t.Errorf("docs/configuration.md:%d documents %s, which no code reads: remove it or fix its name", line, v)
		}
	}
	checkSettingsTable(t, section(t, page, "## Runtime settings"))
}

// checkSettingsTable compares the runtime settings table (setting names
// and defaults, several to a row, in the same order) with domain.Settings.
func checkSettingsTable(t *testing.T, sec []docLine) {
	t.Helper()
	rows, at := firstTable(sec)
	require.NotEmpty(t, rows, "docs/configuration.md's Runtime settings has no table")
	defaults := domain.DefaultSettings().Map()
	seen := map[string]bool{}
	for i, r := range rows {
		names := regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(r[0], -1)
		values := strings.Split(r[1], ",")
		if len(values) != len(names) {
			t.Errorf("docs/configuration.md:%d: %d settings but %d defaults", at[i], len(names), len(values))
			continue
		}
		for j, m := range names {
			name := m[1]
			seen[name] = true
			def, ok := defaults[name]
			if !ok {
				t.Errorf("docs/configuration.md:%d documents the setting %s, which jobs.Settings does not have", at[i], name)
				continue
			}
			want := strings.Trim(string(def), `"`)
			got := strings.Trim(strings.TrimSpace(values[j]), "`")
			if got != want && !(got == "none" && (want == "" || want == "null" || want == "[]")) {
				t.Errorf("docs/configuration.md:%d: %s defaults to %s in the code, not %s", at[i], name, want, got)
			}
		}
	}
	for _, name := range domain.SettingNames() {
		if !seen[name] {
			t.Errorf("jobs.Settings has %s, which docs/configuration.md's Runtime settings table leaves out", name)
		}
	}
}
