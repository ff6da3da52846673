package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// layerRules are ARCHITECTURE.md's "must not" column as imports: for each
// package, import paths (or prefixes ending in "/") its non-test code must
// not use.
var layerRules = map[string][]string{
	"github.com/flinthq/flint/jobs":               {"github.com/flinthq/flint/", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "github.com/a-h/templ"},
	"github.com/flinthq/flint/internal/auth":      {"github.com/flinthq/flint/internal/db", "github.com/flinthq/flint/internal/handlers", "github.com/flinthq/flint/internal/workers", "github.com/flinthq/flint/internal/scheduler", "github.com/flinthq/flint/internal/views", "github.com/flinthq/flint/internal/metrics", "github.com/flinthq/flint/internal/logs", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "database/sql"},
	"github.com/flinthq/flint/internal/db":        {"github.com/flinthq/flint/internal/handlers", "github.com/flinthq/flint/internal/workers", "github.com/flinthq/flint/internal/scheduler", "github.com/flinthq/flint/internal/views", "github.com/flinthq/flint/internal/metrics", "github.com/gofiber/"},
	"github.com/flinthq/flint/internal/workers":   {"github.com/flinthq/flint/internal/db", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "database/sql"},
	"github.com/flinthq/flint/internal/scheduler": {"github.com/flinthq/flint/internal/db", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "database/sql", "net/http"},
	"github.com/flinthq/flint/internal/handlers":  {"github.com/flinthq/flint/internal/db", "github.com/flinthq/flint/internal/workers", "github.com/flinthq/flint/internal/scheduler", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "database/sql"},
	"github.com/flinthq/flint/internal/views":     {"github.com/flinthq/flint/internal/db", "github.com/flinthq/flint/internal/handlers", "github.com/gofiber/", "github.com/jackc/", "database/sql", "net/http"},
	"github.com/flinthq/flint/internal/logs":      {"github.com/flinthq/flint/"},
	"github.com/flinthq/flint/internal/metrics":   {"github.com/flinthq/flint/internal/db", "github.com/jackc/", "database/sql"},
	"github.com/flinthq/flint/client":             {"github.com/flinthq/flint/"}, // generated; stands alone for callers
	"github.com/flinthq/flint/internal/tracing":   {"github.com/flinthq/flint/"},

	"github.com/flinthq/flint/internal/domain": {"github.com/flinthq/flint/internal/", "github.com/flinthq/flint/app", "github.com/jackc/", "github.com/jmoiron/", "github.com/redis/", "github.com/gofiber/", "github.com/a-h/templ", "database/sql"},

	"github.com/flinthq/flint/internal/minheap":  {"github.com/", "golang.org/"}, // the standard library only
	"github.com/flinthq/flint/internal/bufpool":  {"github.com/", "golang.org/"}, // the standard library only
	"github.com/flinthq/flint/internal/jsonutil": {"github.com/flinthq/flint/"},
}

// layerAllow are the exceptions to layerRules: imports a package may use
// although one of its rules covers them. jobs may use the JSON helpers it
// shares with internal/domain, which import no Flint package themselves.
var layerAllow = map[string][]string{
	"github.com/flinthq/flint/jobs":            {"github.com/flinthq/flint/internal/jsonutil"},
	"github.com/flinthq/flint/internal/domain": {"github.com/flinthq/flint/internal/jsonutil"},
}

// TestLayering holds the packages to the layering ARCHITECTURE.md
// describes, so that it stays true as the code changes.
func TestLayering(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", "github.com/flinthq/flint/...")
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
			if slices.Contains(layerAllow[p.ImportPath], imp) {
				continue
			}
			for _, banned := range rules {
				if imp == banned || (strings.HasSuffix(banned, "/") && strings.HasPrefix(imp, banned)) || strings.HasPrefix(imp, banned+"/") {
					t.Errorf("%s imports %s, which ARCHITECTURE.md's layering rules out", p.ImportPath, imp)
				}
			}
		}
	}
	require.Len(t, seen, len(layerRules), "every ruled package exists")
}
