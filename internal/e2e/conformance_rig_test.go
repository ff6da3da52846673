package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The rig of the conformance suite for pull workers (docs/conformance.md):
// a worker implementation is a shell command that serves the suite's job
// types; the suite starts it against a real flint serve, through a proxy
// that records the wire, and checks what the worker and Flint did.

// workerImpl is a pull worker under test.
type workerImpl struct {
	name    string   // python, typescript, external
	command string   // run as sh -c "exec <command>"
	env     []string // extra environment
}

// conformanceWorkers lists the implementations to test: the reference
// Python worker and the TypeScript worker when their runtimes are
// installed, and the command in FLINT_CONFORMANCE_WORKER when it is set.
func conformanceWorkers(t *testing.T) []workerImpl {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	var impls []workerImpl
	if cmd := os.Getenv("FLINT_CONFORMANCE_WORKER"); cmd != "" {
		impls = append(impls, workerImpl{name: "external", command: cmd})
	}
	if _, err := exec.LookPath("python3"); err == nil {
		py := filepath.Join(root, "clients", "python")
		impls = append(impls, workerImpl{name: "python",
			command: `python3 ` + strconv.Quote(filepath.Join(py, "flint_worker.py")) +
				` --url "$FLINT_URL" --name "$FLINT_WORKER_NAME" --concurrency "$FLINT_CONCURRENCY" --log-level debug conformance_jobs`,
			env: []string{"PYTHONPATH=" + py, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"}})
	} else {
		t.Log("python3 is not installed: the Python worker is not tested")
	}
	if why := nodeMissing(); why == "" {
		ts := filepath.Join(root, "clients", "typescript")
		impls = append(impls, workerImpl{name: "typescript",
			command: `node ` + strconv.Quote(filepath.Join(ts, "cli.js")) + ` --log-level debug ` +
				strconv.Quote(filepath.Join(ts, "conformance", "jobs.js"))})
	} else {
		t.Log(why + ": the TypeScript worker is not tested")
	}
	return impls
}

// confRig is a workRig with a recording proxy in front of Flint for one
// worker implementation.
type confRig struct {
	*workRig
	impl workerImpl
	wire *wireRecorder
}

func newConfRig(t *testing.T, impl workerImpl, extra ...string) *confRig {
	t.Helper()
	r := &confRig{workRig: newWorkRig(t, extra...), impl: impl}
	r.wire = newWireRecorder(t, r.url)
	return r
}

// start runs the worker as name with the concurrency and waits until it
// has registered; it returns the process and the worker's id.
func (r *confRig) start(t *testing.T, name string, concurrency int) (*proc, string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "exec "+r.impl.command)
	cmd.Dir = r.dir
	cmd.Env = append(append(os.Environ(), r.impl.env...),
		"FLINT_URL="+r.wire.url, "FLINT_API_KEY="+r.key, "FLINT_WORKER_NAME="+name,
		"FLINT_CONCURRENCY="+strconv.Itoa(concurrency), "FLINT_CONFORMANCE_DIR="+r.dir)
	p := runProc(t, cmd, r.impl.name+" worker "+name)
	var id string
	waitFor(t, 30*time.Second, "worker "+name+" to register", func() bool {
		select {
		case <-p.done:
			t.Fatalf("worker %s exited: %v\n%s", name, p.err, p.out.String())
		default:
		}
		var ws struct {
			Workers []map[string]any `json:"workers"`
		}
		require.Equal(t, http.StatusOK, r.api.do(t, http.MethodGet, "/api/v1/workers", nil, &ws))
		for _, w := range ws.Workers {
			if w["name"] == name {
				id, _ = w["id"].(string)
			}
		}
		return id != ""
	})
	return p, id
}

// wireCall is one request of a worker to the pull API, with its answer.
type wireCall struct {
	path       string
	body       map[string]any
	answer     map[string]any
	start, end time.Time
}

// wireRecorder is a reverse proxy to Flint that keeps the pull API calls
// (register, claim, heartbeat, finish, logs) that went through it.
type wireRecorder struct {
	url   string
	mu    sync.Mutex
	calls []wireCall
}

func newWireRecorder(t *testing.T, flintURL string) *wireRecorder {
	t.Helper()
	target, err := url.Parse(flintURL)
	require.NoError(t, err)
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.FlushInterval = -1
	w := &wireRecorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, req *http.Request) {
		raw, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(raw))
		call := wireCall{path: req.URL.Path, start: time.Now()}
		_ = json.Unmarshal(raw, &call.body)
		cw := &capture{ResponseWriter: rw}
		proxy.ServeHTTP(cw, req)
		call.end = time.Now()
		_ = json.Unmarshal(cw.buf.Bytes(), &call.answer)
		w.mu.Lock()
		w.calls = append(w.calls, call)
		w.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// capture keeps a copy of the answer it passes on.
type capture struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (c *capture) Write(b []byte) (int, error) {
	c.buf.Write(b)
	return c.ResponseWriter.Write(b)
}

func (c *capture) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// of returns the calls finished so far whose path ends with suffix
// ("/claim", "/heartbeat", "/finish", "/logs").
func (w *wireRecorder) of(suffix string) []wireCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []wireCall
	for _, c := range w.calls {
		if strings.HasSuffix(c.path, suffix) {
			out = append(out, c)
		}
	}
	return out
}
