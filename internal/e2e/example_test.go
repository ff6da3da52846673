package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db/dbtest"
)

// The example program under examples/invoices is a module of its own that
// imports Flint as a library (with a replace to this checkout); these
// tests build it as such and run it as its users would.

// exampleBuilds holds each example program built once per test run, with
// the race detector (for tests) and without (for benchmarks).
var (
	exampleMu     sync.Mutex
	exampleBuilds = map[string]*exampleBuild{}
)

type exampleBuild struct {
	once sync.Once
	path string
	err  error
}

// exampleBinary builds examples/invoices as its own module, with the race
// detector.
func exampleBinary(t *testing.T) string {
	t.Helper()
	return exampleProgram(t, "invoices")
}

// exampleProgram builds examples/<name> as its own module, with the race
// detector.
func exampleProgram(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the example program")
	}
	return buildExampleNamed(t, name, true)
}

func buildExample(tb testing.TB, race bool) string {
	tb.Helper()
	return buildExampleNamed(tb, "invoices", race)
}

func buildExampleNamed(tb testing.TB, name string, race bool) string {
	tb.Helper()
	exampleMu.Lock()
	key := fmt.Sprintf("%s/%v", name, race)
	b, ok := exampleBuilds[key]
	if !ok {
		b = &exampleBuild{}
		exampleBuilds[key] = b
	}
	exampleMu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "flint-example-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		args := []string{"build", "-o", b.path}
		if race {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Dir = filepath.Join("..", "..", "examples", name)
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build in examples/%s: %v\n%s", name, err, out)
		}
	})
	require.NoError(tb, b.err)
	return b.path
}

const invoicePayload = `{"currency": "EUR", "lines": [
	{"description": "Widget", "quantity": 3, "unit_cents": 1250},
	{"description": "Gadget", "quantity": 1, "unit_cents": 999}]}`

// waitResult polls the job until it completes and returns it.
func waitCompleted(t *testing.T, api *apiClient, id string) map[string]any {
	t.Helper()
	var job map[string]any
	require.Eventually(t, func() bool {
		job = nil
		api.do(t, http.MethodGet, "/api/v1/jobs/"+id, nil, &job)
		return job["status"] == "completed"
	}, 30*time.Second, 50*time.Millisecond, "job %s never completed: %v", id, job)
	return job
}

// TestExampleProgramServes: the example program's serve runs its own job
// type, refuses a payload its type cannot take at enqueue, and still has
// the stock commands.
func TestExampleProgramServes(t *testing.T) {
	t.Parallel()
	bin := exampleBinary(t)
	addr := freeAddr(t)
	startBinary(t, bin, "serve", dbtest.NewDatabase(t), "FLINT_ADDR="+addr)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)

	var job map[string]any
	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "invoice.total", "payload": `+invoicePayload+`}`, &job), "%v", job)
	done := waitCompleted(t, api, job["id"].(string))
	require.Equal(t, map[string]any{"currency": "EUR", "lines": 2.0, "total_cents": 4749.0}, done["result"])

	var refused apiError
	require.Equal(t, http.StatusUnprocessableEntity, api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "invoice.total", "payload": {"currency": "EURO", "lines": []}}`, &refused))
	require.Equal(t, "payload", refused.Error.Field)
	require.Contains(t, refused.Error.Message, "currency must be a three-letter code")
	require.Equal(t, http.StatusUnprocessableEntity, api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "invoice.total", "payload": {"currency": "EUR", "lines": [], "discount": 5}}`, &refused))
	require.Contains(t, refused.Error.Message, `unknown field "discount"`)

	require.Equal(t, http.StatusCreated, api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "invoice.seen", "payload": {"invoice": "INV-1042"}}`, &job), "%v", job)
	done = waitCompleted(t, api, job["id"].(string))
	require.Nil(t, done["result"], "invoice.seen has nothing to return")
	require.Equal(t, http.StatusUnprocessableEntity, api.do(t, http.MethodPost, "/api/v1/jobs",
		`{"type": "invoice.seen", "payload": {}}`, &refused))
	require.Contains(t, refused.Error.Message, "invoice must name the invoice opened")

	out, err := exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "flint dev")
	out, err = exec.Command(bin, "users", "help").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "reset-password")
}

// TestStockAPIAcceptsTypesItsWorkersServe: a stock `flint api` refuses a
// type no process serves, and accepts it once the example program's
// worker has registered; the job runs there and nowhere else.
func TestStockAPIAcceptsTypesItsWorkersServe(t *testing.T) {
	t.Parallel()
	bin := exampleBinary(t)
	u := dbtest.NewDatabase(t)
	addr := freeAddr(t)
	startFlint(t, "api", u, "FLINT_ADDR="+addr)
	api := newAPIClient("http://" + addr)
	api.waitReady(t, 60*time.Second)
	// A stock worker, which has no handler for invoice.total, runs too.
	startFlint(t, "worker", u, "FLINT_WORKER_ID=stock-worker").ready(t, 60*time.Second)

	body := `{"type": "invoice.total", "payload": ` + invoicePayload + `}`
	var refused apiError
	require.Equal(t, http.StatusUnprocessableEntity, api.do(t, http.MethodPost, "/api/v1/jobs", body, &refused))
	require.Equal(t, "type", refused.Error.Field)
	require.Contains(t, refused.Error.Message, `unknown job type "invoice.total"`)

	startBinary(t, bin, "worker", u, "FLINT_WORKER_ID=invoices-worker").ready(t, 60*time.Second)
	var job map[string]any
	require.Eventually(t, func() bool {
		job = nil
		return api.do(t, http.MethodPost, "/api/v1/jobs", body, &job) == http.StatusCreated
	}, 15*time.Second, 100*time.Millisecond, "the API never accepted the type its worker serves: %v", job)
	done := waitCompleted(t, api, job["id"].(string))
	require.Equal(t, 4749.0, done["result"].(map[string]any)["total_cents"])
	require.Equal(t, 1.0, done["attempt"], "the stock worker never took it")
	execs := done["executions"].([]any)
	require.Len(t, execs, 1)
	require.Equal(t, "invoices-worker", execs[0].(map[string]any)["worker_id"], "ran by the worker that serves its type")
}
