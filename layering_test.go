package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// layerRules are ARCHITECTURE.md's "must not" column as imports: for each
// package, import paths (or prefixes ending in "/") its non-test code must
// not use.
var layerRules = map[string][]string{
	"flint/jobs":      {"flint/", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "github.com/a-h/templ"},
	"flint/auth":      {"flint/db", "flint/handlers", "flint/workers", "flint/scheduler", "flint/views", "flint/metrics", "flint/logs", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "database/sql"},
	"flint/db":        {"flint/handlers", "flint/workers", "flint/scheduler", "flint/views", "flint/metrics", "github.com/gofiber/"},
	"flint/workers":   {"flint/db", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "database/sql"},
	"flint/scheduler": {"flint/db", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "database/sql", "net/http"},
	"flint/handlers":  {"flint/db", "flint/workers", "flint/scheduler", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "database/sql"},
	"flint/views":     {"flint/db", "flint/handlers", "github.com/gofiber/", "github.com/jackc/", "database/sql", "net/http"},
	"flint/logs":      {"flint/"},
	"flint/metrics":   {"flint/db", "github.com/jackc/", "database/sql"},
	"flint/client":    {"flint/"}, // generated; stands alone for callers
}

// TestLayering holds the packages to the layering ARCHITECTURE.md
// describes, so that it stays true as the code changes.
func TestLayering(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "./...")
	out, err := cmd.Output()
	require.NoError(t, err)
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := map[string]bool{}
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		rules, ok := layerRules[p.ImportPath]
		if !ok {
			continue
		}
		seen[p.ImportPath] = true
		for _, imp := range p.Imports {
			for _, banned := range rules {
				if imp == banned || (strings.HasSuffix(banned, "/") && strings.HasPrefix(imp, banned)) || strings.HasPrefix(imp, banned+"/") {
					t.Errorf("%s imports %s, which ARCHITECTURE.md's layering rules out", p.ImportPath, imp)
				}
			}
		}
	}
	require.Len(t, seen, len(layerRules), "every ruled package exists")
}
