package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
)

// pythonJobs are the handlers the tests run. Handlers that must be held
// wait for a file the test creates (the "release"), so that nothing
// depends on timing.
const pythonJobs = `
import os, time
from flint_worker import handler, Retry, SELF

MARKS = os.environ["FLINT_TEST_MARKS"]

def mark(kind, job):
    open(os.path.join(MARKS, "%s-%s-%d-%d" % (kind, job.id, job.attempt, os.getpid())), "w").close()

@handler("py.echo")
def echo(job):
    job.log("echoing", n=job.payload.get("n"))
    return {"echo": job.payload, "attempt": job.attempt}

@handler("py.flaky")
def flaky(job):
    if job.attempt == 1:
        raise Retry("the first attempt fails", after=0.1)
    return {"attempt": job.attempt}

@handler("py.broken", schema={"type": "object", "required": ["invoice"],
                              "properties": {"invoice": {"type": "string", "pattern": "^INV-"}}})
def broken(job):
    raise ValueError("no such invoice %s" % job.payload["invoice"])

@handler("py.gated")
def gated(job):
    mark("start", job)
    job.progress(40, "halfway")
    release = os.path.join(MARKS, "release")
    while not os.path.exists(release):
        job.check()
        time.sleep(0.01)
    mark("done", job)
    return {"released": True}

@handler("py.work")
def work(job):
    mark("start", job)
    time.sleep(job.payload["ms"] / 1000.0)
    return {"pid": os.getpid()}

@handler("py.fetch")
def fetch(job):
    return {"name": job.payload["name"], "width": 1024}

@handler("py.resize")
def resize(job):
    img = job.parent("fetch")
    return {"thumb": "thumb-" + img["name"], "width": min(img["width"], 128)}

@handler("py.extract")
def extract(job):
    keys = []
    for i, n in enumerate(job.payload["numbers"]):
        keys.append("square-%d" % i)
        job.spawn(keys[-1], "py.square", {"n": n}, depends_on=[SELF])
    job.spawn("total", "py.total", depends_on=keys)
    return {"squares": len(keys)}

@handler("py.square")
def square(job):
    return job.payload["n"] ** 2

@handler("py.total")
def total(job):
    return {"sum": sum(job.parent(k) for k in job.parents)}

@handler("py.order")
def order(job):
    def charge():
        mark("charge", job)
        return {"id": "ch_" + job.payload["order"]}
    c = job.step("charge", charge)
    inv = job.step("invoice", lambda: "INV-" + c["id"])
    def email():
        mark("email", job)
        if job.attempt == 1:
            raise Retry("mail server said 451", after=0.1)
        return True
    job.step("email", email)
    return {"charge": c["id"], "invoice": inv}

@handler("py.refund")
def refund(job):
    sig = job.wait_for_signal("approval", timeout=job.payload.get("timeout", 48 * 3600))
    if sig.timed_out:
        return {"refunded": False}
    return {"refunded": True, "by": sig.body["by"]}

@handler("py.nap")
def nap(job):
    job.step("before", lambda: mark("before", job))
    job.sleep("cool-off", 1)
    return job.step("after", lambda: "woke")

@handler("py.report")
def report(job):
    b = job.batch
    return {"batch": b["id"], "members": b["total"], "completed": b["counts"].get("completed", 0),
            "results": sorted(v["name"] for k, v in job.parents.items() if k != "batch")}
`

// workRig is a flint serve process, a work-scoped key and a directory for
// the handlers and the marks they leave: what the tests of pull workers
// (Python, TypeScript, the conformance suite) run against.
type workRig struct {
	serve *proc
	env   []string // the serve process's extra settings
	api   *apiClient
	url   string
	dbURL string
	key   string // work scope only
	dir   string // handlers module and the marks handlers leave
	store *db.Store
}

func pythonRig(t *testing.T, extra ...string) *workRig {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the reference Python worker is not tested")
	}
	r := newWorkRig(t, extra...)
	require.NoError(t, os.WriteFile(filepath.Join(r.dir, "testjobs.py"), []byte(pythonJobs), 0o644))
	return r
}

// newWorkRig starts flint serve on a database of its own with extra
// settings and makes a key with only the work scope.
func newWorkRig(t *testing.T, extra ...string) *workRig {
	t.Helper()
	u := dbtest.NewDatabase(t)
	addr := freeAddr(t)
	env := append([]string{"FLINT_ADDR=" + addr}, extra...)
	r := &workRig{serve: startFlint(t, "serve", u, env...), env: env, api: newAPIClient("http://" + addr), url: "http://" + addr,
		dbURL: u, dir: t.TempDir()}
	r.api.waitServing(t, r.serve, 60*time.Second)
	r.store = openStore(t, u)
	r.key = r.newKey(t, "worker", "work")
	return r
}

// newKey makes an API key with the scopes and returns its secret.
func (r *workRig) newKey(t *testing.T, name string, scopes ...string) string {
	t.Helper()
	var key struct {
		Secret string `json:"secret"`
	}
	require.Equal(t, http.StatusCreated, r.api.do(t, http.MethodPost, "/api/v1/keys", map[string]any{"name": name, "scopes": scopes}, &key))
	require.NotEmpty(t, key.Secret)
	return key.Secret
}

// pythonWorker starts `python3 flint_worker.py testjobs` and waits until it
// has registered; it returns the process and the worker's id.
func (r *workRig) pythonWorker(t *testing.T, args ...string) (*proc, string) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "clients", "python", "flint_worker.py"))
	require.NoError(t, err)
	cmd := exec.Command("python3", append([]string{script, "--url", r.url, "--log-level", "debug"}, append(args, "testjobs")...)...)
	cmd.Dir = r.dir
	cmd.Env = append(os.Environ(), "FLINT_API_KEY="+r.key, "FLINT_TEST_MARKS="+r.dir, "PYTHONUNBUFFERED=1")
	p := runProc(t, cmd, "python worker")
	var id string
	waitFor(t, 30*time.Second, "the python worker to register", func() bool {
		select {
		case <-p.done:
			t.Fatalf("the python worker exited: %v\n%s", p.err, p.out.String())
		default:
		}
		out := p.out.String()
		i := strings.Index(out, "registered as ")
		if i < 0 {
			return false
		}
		id = strings.TrimSuffix(strings.Fields(out[i+len("registered as "):])[0], ":")
		return true
	})
	return p, id
}

// enqueue posts a job with the bootstrap key and returns its id.
func (r *workRig) enqueue(t *testing.T, body string) string {
	t.Helper()
	var job map[string]any
	require.Equal(t, http.StatusCreated, r.api.do(t, http.MethodPost, "/api/v1/jobs", body, &job), "%v", job)
	return job["id"].(string)
}

func (r *workRig) job(t *testing.T, id string) map[string]any {
	t.Helper()
	var job map[string]any
	require.Equal(t, http.StatusOK, r.api.do(t, http.MethodGet, "/api/v1/jobs/"+id, nil, &job))
	return job
}

func (r *workRig) waitStatus(t *testing.T, id, status string) map[string]any {
	t.Helper()
	var job map[string]any
	waitFor(t, 30*time.Second, "job "+id+" to be "+status, func() bool {
		job = r.job(t, id)
		return job["status"] == status
	})
	return job
}

// marks lists the marks handlers left of kind ("start", "done").
func (r *workRig) marks(t *testing.T, kind string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(r.dir, kind+"-*"))
	require.NoError(t, err)
	return m
}

// outcomes counts the recorded executions of the jobs by outcome.
func (r *workRig) outcomes(t *testing.T) map[string]int {
	t.Helper()
	rows, err := r.store.Pool().Query(context.Background(), `SELECT outcome, count(*) FROM job_executions GROUP BY outcome`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var o string
		var n int
		require.NoError(t, rows.Scan(&o, &n))
		out[o] = n
	}
	require.NoError(t, rows.Err())
	return out
}
