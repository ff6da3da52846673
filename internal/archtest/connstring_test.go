package archtest

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// connStringParsers are the calls that read a PostgreSQL connection
// string, and the one place each may appear. Every connection Flint makes
// (the pool, LISTEN, migrations, the commands) must read DATABASE_URL the
// same way, through db.ParseConnConfig (db/conninfo.go) or, for the pool's
// own settings, pgxpool.ParseConfig after it (db/store.go): a second
// parser is how multi-host strings once worked for the pool and failed
// for migrations.
var connStringParsers = map[string]string{
	"pgx.ParseConfig":     "db/conninfo.go",
	"pgxpool.ParseConfig": "db/store.go",
	"pgx.Connect":         "",
	"pgxpool.New":         "",
	"pgconn.Connect":      "",
	"pgconn.ParseConfig":  "",
	"sql.Open":            "",
}

// bannedDrivers are PostgreSQL clients with parsers of their own.
var bannedDrivers = []string{"github.com/lib/pq", "github.com/amacneil/dbmate"}

// TestOneConnectionStringParser holds every connection to PostgreSQL,
// migrations included, to the parser the store's pool uses.
func TestOneConnectionStringParser(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-json=ImportPath,Dir,GoFiles,Deps", "github.com/flinthq/flint/...").Output()
	require.NoError(t, err)
	root := ""
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath string
			Dir        string
			GoFiles    []string
			Deps       []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		if p.ImportPath == "github.com/flinthq/flint" {
			root = p.Dir
		}
		for _, d := range p.Deps {
			for _, banned := range bannedDrivers {
				if d == banned || strings.HasPrefix(d, banned+"/") {
					t.Errorf("%s depends on %s, which parses connection strings its own way", p.ImportPath, d)
				}
			}
		}
		if strings.HasSuffix(p.ImportPath, "/dbtest") {
			continue // test helpers connect to test servers directly
		}
		for _, f := range p.GoFiles {
			path := filepath.Join(p.Dir, f)
			file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			require.NoError(t, err)
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				pkg, ok := sel.X.(*ast.Ident)
				if !ok {
					return true
				}
				name := pkg.Name + "." + sel.Sel.Name
				allowed, watched := connStringParsers[name]
				if !watched {
					return true
				}
				rel := strings.TrimPrefix(filepath.ToSlash(path), filepath.ToSlash(root)+"/")
				if allowed == "" || !strings.HasSuffix(filepath.ToSlash(path), "/"+allowed) {
					t.Errorf("%s calls %s: read connection strings with db.ParseConnConfig, as the pool does", rel, name)
				}
				return true
			})
		}
	}
	require.NotEmpty(t, root)
}
