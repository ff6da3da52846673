package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// sseClient reads one SSE stream.
type sseClient struct {
	resp   *http.Response
	events chan sseMsg
}

type sseMsg struct {
	id, event, data string
}

func openSSE(t *testing.T, base, query, lastID string) *sseClient {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/sse/events"+query, nil)
	require.NoError(t, err)
	req.Header.Set("X-API-Key", apiKey)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	c := &sseClient{resp: resp, events: make(chan sseMsg, 1000)}
	go func() {
		defer close(c.events)
		sc := bufio.NewScanner(resp.Body)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.data != "" || m.event != "" {
					c.events <- m
				}
				m = sseMsg{}
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				m.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				m.data = strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return c
}

func (c *sseClient) next(t *testing.T) sseMsg {
	t.Helper()
	select {
	case m, ok := <-c.events:
		require.True(t, ok, "stream ended")
		return m
	case <-time.After(20 * time.Second):
		t.Fatal("no event within 20 s")
		return sseMsg{}
	}
}

// sseRig runs the API with a broker fed by an event bus, and a worker
// pool, in one process; redisURL empty means PostgreSQL-only mode. register
// adds job types to the built-in ones.
func sseRig(t *testing.T, redisURL, prefix string, register ...func(*jobs.Registry)) (base string, store *db.Store) {
	t.Helper()
	store, dbURL := dbtest.NewStore(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	run := func(f func(context.Context) error) {
		wg.Add(1)
		go func() { defer wg.Done(); _ = f(ctx) }()
	}
	broker := handlers.NewBroker(1000)
	var r *db.Redis
	if redisURL != "" {
		var err error
		r, err = db.OpenRedis(ctx, redisURL, prefix, logger)
		require.NoError(t, err)
		store.SetRedis(r)
		run(r.Run)
	}
	bus := db.NewEventBus(store, r, false, logger, broker.Deliver)
	store.SetEventSink(bus)
	run(bus.Run)
	subscribed := make(chan struct{})
	if r != nil {
		run(bus.RunRedisSubscriber)
		close(subscribed)
	} else {
		l := db.NewListener(dbURL, logger, 0)
		l.Handle(db.ChannelEvents, bus.ReceivePostgres)
		var once sync.Once
		l.OnConnect(func() { once.Do(func() { close(subscribed) }) })
		run(l.Run)
	}
	<-subscribed
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	for _, r := range register {
		r(reg)
	}
	pool := workers.NewPool(workers.Config{WorkerID: "sse", Workers: 2, PollInterval: 50 * time.Millisecond}, store, reg, logger)
	run(pool.Run)
	app := handlers.New(handlers.Config{APIKey: apiKey, Broker: broker, BaseContext: ctx}, store, reg, logger)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(time.Second) })
	return "http://" + ln.Addr().String(), store
}

func postJSON(t *testing.T, url, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-API-Key", apiKey)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	return out
}

// TestSSEEndToEnd subscribes to one job's events, enqueues it, and expects
// every transition in order; then reconnects with Last-Event-ID and gets
// what happened while it was away. Both transports.
func TestSSEEndToEnd(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"postgres", "redis"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var redisURL, prefix string
			if mode == "redis" {
				redisURL, prefix = dbtest.RedisPrefix(t)
			}
			base, _ := sseRig(t, redisURL, prefix)

			all := openSSE(t, base, "?type=sleep", "")
			job := postJSON(t, base+"/api/v1/jobs", `{"type":"sleep","payload":{"ms":100}}`)
			id := job["id"].(string)
			one := openSSE(t, base, "?job_id="+id, "")
			var statuses []string
			var lastID string
			for len(statuses) < 4 {
				m := all.next(t)
				require.Equal(t, "job", m.event)
				var e map[string]any
				require.NoError(t, json.Unmarshal([]byte(m.data), &e))
				require.Equal(t, id, e["job_id"])
				for _, k := range []string{"job_id", "status", "type", "attempt", "at"} {
					require.Contains(t, e, k)
				}
				statuses = append(statuses, e["status"].(string))
				lastID = m.id
			}
			// The enqueue announces its job after its commit, and a worker
			// that polls in that moment can claim it and announce the claim
			// first: the two come from different goroutines (from different
			// processes, in production). A worker's own announcements keep
			// their order.
			if statuses[0] == "claimed" {
				statuses[0], statuses[1] = statuses[1], statuses[0]
			}
			require.Equal(t, []string{"queued", "claimed", "running", "completed"}, statuses, "every transition once; the worker's in order")
			// The job-filtered stream opened after the enqueue sees the rest.
			m := one.next(t)
			require.Contains(t, m.data, id)

			// Disconnect; meanwhile another job runs; reconnect with the last id.
			require.NoError(t, all.resp.Body.Close())
			second := postJSON(t, base+"/api/v1/jobs", `{"type":"sleep","payload":{"ms":1}}`)
			sid := second["id"].(string)
			// A stream resumed from the same id sees the second job finish:
			// then the broker holds all of its events.
			witness := openSSE(t, base, "?type=sleep", lastID)
			for done := false; !done; {
				var e map[string]any
				_ = json.Unmarshal([]byte(witness.next(t).data), &e)
				done = e["job_id"] == sid && e["status"] == "completed"
			}
			again := openSSE(t, base, "?type=sleep", lastID)
			var missed []string
			for len(missed) == 0 || missed[len(missed)-1] != "completed" {
				m := again.next(t)
				require.NotEqual(t, "resync", m.event)
				require.Contains(t, m.data, sid)
				var e map[string]any
				require.NoError(t, json.Unmarshal([]byte(m.data), &e))
				missed = append(missed, e["status"].(string))
			}
			// A run shorter than the pool's start delay writes its start
			// with its outcome: no running event of its own.
			if len(missed) == 3 {
				require.Equal(t, []string{"queued", "claimed", "completed"}, missed)
			} else {
				require.Equal(t, []string{"queued", "claimed", "running", "completed"}, missed)
			}

			// An id this process never issued asks the client to resync.
			lost := openSSE(t, base, "", "feedfacecafe-12")
			require.Equal(t, "resync", lost.next(t).event)
		})
	}
}

func TestSSEValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, q := range []string{"?job_id=nope", "?status=started", "?type=%00"} {
		r := b.do(t, http.MethodGet, "/api/v1/sse/events"+q, "", "")
		require.Equal(t, http.StatusUnprocessableEntity, r.status, q)
	}
}

// A handler's progress reaches API clients while the job runs: on the
// event stream (progress, progress_message on the running job's events),
// on the job and in the jobs list. Both transports.
func TestProgressReachesTheAPI(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"postgres", "redis"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var redisURL, prefix string
			if mode == "redis" {
				redisURL, prefix = dbtest.RedisPrefix(t)
			}
			release := make(chan struct{})
			var once sync.Once
			base, _ := sseRig(t, redisURL, prefix, func(r *jobs.Registry) {
				r.Register("export", jobs.HandlerFunc(func(ctx context.Context, j *jobs.Job) (any, error) {
					jobs.ReportProgress(ctx, 40, "copied 400 of 1000 rows")
					select {
					case <-release:
					case <-ctx.Done():
					}
					return nil, nil
				}))
			})
			t.Cleanup(func() { once.Do(func() { close(release) }) })
			get := func(path string) map[string]any {
				t.Helper()
				req, _ := http.NewRequest(http.MethodGet, base+path, nil)
				req.Header.Set("X-API-Key", apiKey)
				resp, err := http.DefaultClient.Do(req)
				require.NoError(t, err)
				defer resp.Body.Close()
				require.Equal(t, http.StatusOK, resp.StatusCode, path)
				var out map[string]any
				require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
				return out
			}

			stream := openSSE(t, base, "?type=export", "")
			id := postJSON(t, base+"/api/v1/jobs", `{"type":"export","queue":"exports"}`)["id"].(string)
			for {
				m := stream.next(t)
				require.Equal(t, "job", m.event)
				var e map[string]any
				require.NoError(t, json.Unmarshal([]byte(m.data), &e))
				require.Equal(t, id, e["job_id"])
				if e["progress"] == nil {
					require.NotContains(t, e, "progress_message", "no progress yet: neither field")
					continue
				}
				require.Equal(t, "running", e["status"])
				require.EqualValues(t, 40, e["progress"])
				require.Equal(t, "copied 400 of 1000 rows", e["progress_message"])
				break
			}

			j := get("/api/v1/jobs/" + id)
			require.Equal(t, "running", j["status"])
			require.EqualValues(t, 40, j["progress"])
			require.Equal(t, "copied 400 of 1000 rows", j["progress_message"])
			list := get("/api/v1/jobs?queue=exports&status=running")["jobs"].([]any)
			require.Len(t, list, 1)
			row := list[0].(map[string]any)
			require.Equal(t, id, row["id"])
			require.EqualValues(t, 40, row["progress"])
			require.Equal(t, "copied 400 of 1000 rows", row["progress_message"])

			once.Do(func() { close(release) })
			for {
				var e map[string]any
				require.NoError(t, json.Unmarshal([]byte(stream.next(t).data), &e))
				if e["status"] == "completed" {
					break
				}
			}
		})
	}
}
