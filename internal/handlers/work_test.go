package handlers_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/jobs"
)

// workRig serves the pull API over a fresh database.
type workRig struct {
	app   *fiber.App
	store *db.Store
	ctx   context.Context
	hub   *handlers.WorkHub
}

func workSetup(t *testing.T) *workRig {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	hub := handlers.NewWorkHub(0)
	app := handlers.New(handlers.Config{APIKey: apiKey, Access: store, BaseContext: ctx,
		Types:   domain.NewCatalog(reg, nil, store.ServedTypes),
		Workers: func(ctx context.Context) ([]domain.WorkerInfo, error) { return store.ListWorkers(ctx, 15*time.Second) },
		Work:    &handlers.WorkConfig{Store: store, Hub: hub, LeaseTTL: 30 * time.Second, HeartbeatInterval: 5 * time.Second}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return &workRig{app: app, store: store, ctx: ctx, hub: hub}
}

// call sends body as JSON with key and decodes the answer into out.
func (r *workRig) call(t *testing.T, key, method, path string, body any, out any) int {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	case nil:
	default:
		var err error
		b, err = json.Marshal(v)
		require.NoError(t, err)
	}
	req := httptest.NewRequest(method, path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", key)
	resp, err := r.app.Test(req, -1)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if out != nil {
		require.NoError(t, json.Unmarshal(raw, out), "%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode
}

type errBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	} `json:"error"`
}

type claimed struct {
	Jobs []struct {
		ID             uuid.UUID       `json:"id"`
		Type           string          `json:"type"`
		Queue          string          `json:"queue"`
		Payload        json.RawMessage `json:"payload"`
		Attempt        int             `json:"attempt"`
		MaxRetries     int             `json:"max_retries"`
		LeaseToken     uuid.UUID       `json:"lease_token"`
		LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	} `json:"jobs"`
}

func (r *workRig) register(t *testing.T, key string, body string) string {
	t.Helper()
	var out struct {
		ID               string  `json:"id"`
		HeartbeatSeconds float64 `json:"heartbeat_seconds"`
		LeaseSeconds     float64 `json:"lease_seconds"`
	}
	require.Equal(t, http.StatusCreated, r.call(t, key, http.MethodPost, "/api/v1/workers", body, &out))
	require.Equal(t, 5.0, out.HeartbeatSeconds)
	require.Equal(t, 30.0, out.LeaseSeconds)
	return out.ID
}

func (r *workRig) enqueue(t *testing.T, ps ...jobs.EnqueueParams) []*jobs.Job {
	t.Helper()
	res, err := r.store.Enqueue(r.ctx, ps...)
	require.NoError(t, err)
	out := make([]*jobs.Job, len(res))
	for i, e := range res {
		out[i] = e.Job
	}
	return out
}

func (r *workRig) job(t *testing.T, id uuid.UUID) *jobs.Job {
	t.Helper()
	j, err := r.store.GetJob(r.ctx, id)
	require.NoError(t, err)
	return j
}

// TestPullWorkerLifecycle: a remote worker registers, is offered only its
// types, heartbeats (extending its leases, learning of cancellations and
// lost leases), logs, and finishes jobs in one call each way a job can
// end; a stale token changes nothing; deregistering hands back what it
// holds without charging an attempt.
//
//flint:long a remote worker's whole life, each step building on the last, reads best top to bottom
func TestPullWorkerLifecycle(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	id := r.register(t, apiKey, `{"name": "py-1", "types": ["py.resize", "py.mail"], "concurrency": 8, "language": "python", "version": "3.12"}`)
	js := r.enqueue(t,
		jobs.EnqueueParams{Type: "noop"},
		jobs.EnqueueParams{Type: "py.resize", Payload: json.RawMessage(`{"w": 1}`)},
		jobs.EnqueueParams{Type: "py.mail"},
		jobs.EnqueueParams{Type: "py.resize", MaxRetries: new(int)},
		jobs.EnqueueParams{Type: "py.mail"},
		jobs.EnqueueParams{Type: "py.resize"},
	)
	var got claimed
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"max": 100}`, &got))
	require.Len(t, got.Jobs, 5, "every job of its types, none of another")
	byID := map[uuid.UUID]int{}
	for i, j := range got.Jobs {
		require.NotEqual(t, "noop", j.Type)
		require.Equal(t, 1, j.Attempt)
		require.NotEqual(t, uuid.Nil, j.LeaseToken)
		require.WithinDuration(t, time.Now().Add(30*time.Second), j.LeaseExpiresAt, 5*time.Second)
		byID[j.ID] = i
	}
	lease := func(j *jobs.Job) (uuid.UUID, uuid.UUID) { return j.ID, got.Jobs[byID[j.ID]].LeaseToken }
	require.JSONEq(t, `{"w": 1}`, string(got.Jobs[byID[js[1].ID]].Payload))

	// Workers page and API: the worker with its language, types and leases.
	var ws struct {
		Workers []domain.WorkerInfo `json:"workers"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodGet, "/api/v1/workers", nil, &ws))
	require.Len(t, ws.Workers, 1)
	require.Equal(t, domain.WorkerRemote, ws.Workers[0].Kind)
	require.Equal(t, "python", ws.Workers[0].Language)
	require.Equal(t, "py-1", ws.Workers[0].Name)
	require.Equal(t, []string{"py.mail", "py.resize"}, ws.Workers[0].Types)
	require.Len(t, ws.Workers[0].Running, 5)

	// A cancel request and a lost lease show in the heartbeat's lost list;
	// progress rides along.
	_, err := r.store.CancelJob(r.ctx, js[2].ID)
	require.NoError(t, err)
	j1, t1 := lease(js[1])
	j2, t2 := lease(js[2])
	j3, t3 := lease(js[3])
	var beat struct {
		State string      `json:"state"`
		Lost  []uuid.UUID `json:"lost"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/heartbeat", map[string]any{"leases": []map[string]any{
		{"job_id": j1, "lease_token": t1, "progress": 40, "progress_message": "halfway"},
		{"job_id": j2, "lease_token": t2},
		{"job_id": j3, "lease_token": uuid.New()},
	}}, &beat))
	require.Equal(t, "running", beat.State)
	require.ElementsMatch(t, []uuid.UUID{j2, j3}, beat.Lost)
	require.Equal(t, 40, *r.job(t, j1).Progress)

	// Logs go with the attempt; a stale token stores nothing.
	var e errBody
	require.Equal(t, http.StatusConflict, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+j1.String()+"/logs",
		map[string]any{"lease_token": uuid.New(), "lines": []map[string]any{{"message": "x"}}}, &e))
	require.Equal(t, "lease_lost", e.Error.Code)
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs/"+j1.String()+"/logs",
		map[string]any{"lease_token": t1, "lines": []map[string]any{{"level": "warn", "message": "resizing with password=hunter2", "attrs": map[string]any{"token": "abc", "w": 1}}}}, nil))
	lines, err := r.store.JobLogs(r.ctx, j1, 0, 10)
	require.NoError(t, err)
	require.Len(t, lines, 1)
	require.Equal(t, 1, lines[0].Attempt)
	require.Equal(t, "warn", lines[0].Level)
	require.NotContains(t, lines[0].Message, "hunter2", "scrubbed like the process log")
	require.NotEqual(t, "abc", lines[0].Attrs["token"])

	// One finish call: completed with a result, failed (retried), failed
	// for good, cancelled (the cancel asked), and a stale token.
	j4, t4 := lease(js[4])
	var fin struct {
		Outcomes []struct {
			JobID uuid.UUID `json:"job_id"`
			OK    bool      `json:"ok"`
			Error string    `json:"error"`
		} `json:"outcomes"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/finish", map[string]any{"outcomes": []map[string]any{
		{"job_id": j1, "lease_token": t1, "status": "completed", "result": map[string]int{"w": 100}},
		{"job_id": j4, "lease_token": t4, "status": "failed", "error": "smtp down", "retry_after_seconds": 120},
		{"job_id": j3, "lease_token": t3, "status": "failed", "error": "bad image", "retryable": false},
		{"job_id": j2, "lease_token": t2, "status": "cancelled"},
		{"job_id": js[5].ID, "lease_token": uuid.New(), "status": "completed"},
	}}, &fin))
	require.Len(t, fin.Outcomes, 5)
	for i, want := range []bool{true, true, true, true, false} {
		require.Equal(t, want, fin.Outcomes[i].OK, "outcome %d", i)
	}
	require.Equal(t, "lease_lost", fin.Outcomes[4].Error)
	done := r.job(t, j1)
	require.Equal(t, jobs.StateCompleted, done.Status)
	require.JSONEq(t, `{"w": 100}`, string(done.Result))
	retried := r.job(t, j4)
	require.Equal(t, jobs.StateScheduled, retried.Status)
	require.WithinDuration(t, time.Now().Add(2*time.Minute), retried.RunAt, 10*time.Second, "retry_after_seconds honoured")
	require.Equal(t, jobs.StateDeadLetter, r.job(t, j3).Status, "failed for good")
	require.Equal(t, jobs.StateCancelled, r.job(t, j2).Status)
	require.Equal(t, jobs.StateRunning, r.job(t, js[5].ID).Status, "a stale token changed nothing")

	// Deregistering hands the last job back, its attempt refunded.
	var dereg struct {
		Released int `json:"released"`
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodDelete, "/api/v1/workers/"+id, nil, &dereg))
	require.Equal(t, 1, dereg.Released)
	back := r.job(t, js[5].ID)
	require.Equal(t, jobs.StateQueued, back.Status)
	require.Equal(t, 0, back.Attempt)
	require.Equal(t, http.StatusNotFound, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{}`, &e))
	require.Contains(t, e.Error.Message, "register again")
}

// TestPullWorkerRetryableFalseWithRetriesLeft: retryable false parks a
// job in the DLQ even with retries left.
func TestPullWorkerRetryableFalseWithRetriesLeft(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	id := r.register(t, apiKey, `{"types": ["py.x"]}`)
	j := r.enqueue(t, jobs.EnqueueParams{Type: "py.x"})[0]
	var got claimed
	r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{}`, &got)
	require.Len(t, got.Jobs, 1)
	require.Equal(t, 3, got.Jobs[0].MaxRetries)
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/finish", map[string]any{"outcomes": []map[string]any{
		{"job_id": j.ID, "lease_token": got.Jobs[0].LeaseToken, "status": "failed", "error": "no such file", "retryable": false}}}, nil))
	d := r.job(t, j.ID)
	require.Equal(t, jobs.StateDeadLetter, d.Status)
	require.Equal(t, "no such file", *d.LastError)
}

func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// TestHeartbeatAfterDeregistrationDoesNotResurrect: a heartbeat that
// another API process answers from its cache after the worker deregistered
// elsewhere is a 404, and the worker stays gone (it does not reappear in
// the registry, where its claims would be accepted again).
func TestHeartbeatAfterDeregistrationDoesNotResurrect(t *testing.T) {
	t.Parallel()
	a := workSetup(t)
	reg := jobs.NewRegistry()
	b := handlers.New(handlers.Config{APIKey: apiKey, Access: a.store, BaseContext: a.ctx,
		Types: domain.NewCatalog(reg, nil, a.store.ServedTypes),
		Work:  &handlers.WorkConfig{Store: a.store, LeaseTTL: 30 * time.Second, HeartbeatInterval: 5 * time.Second}},
		a.store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	other := &workRig{app: b, store: a.store, ctx: a.ctx}
	id := a.register(t, apiKey, `{"types": ["py.x"]}`)
	// Process a knows the worker (its cache); process b deregisters it.
	require.Equal(t, http.StatusOK, a.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/heartbeat", `{}`, nil))
	require.Equal(t, http.StatusOK, other.call(t, apiKey, http.MethodDelete, "/api/v1/workers/"+id, nil, nil))
	var e errBody
	require.Equal(t, http.StatusNotFound, a.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/heartbeat", `{}`, &e))
	_, err := a.store.GetWorker(a.ctx, id)
	require.ErrorIs(t, err, domain.ErrNotFound, "the heartbeat brought the worker back")
	require.Equal(t, http.StatusNotFound, other.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{}`, &e))
}

// A job of a type a remote worker has just registered for is accepted at
// once by the process that registered it, even though registering loaded
// the catalog (to check its size) a moment before the type was served.
func TestTypeAcceptedRightAfterRegistration(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	var e errBody
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs",
		`{"type": "py.fresh"}`, &e), "a type nothing serves is refused")
	r.register(t, apiKey, `{"types": ["py.fresh"]}`)
	require.Equal(t, http.StatusCreated, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs", `{"type": "py.fresh"}`, &e), "%+v", e)
}
