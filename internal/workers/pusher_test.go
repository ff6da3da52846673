package workers_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// endpoint is a push receiver: it keeps every request and answers what
// the test tells it to.
type endpoint struct {
	mu       sync.Mutex
	reqs     []pushed
	answer   func(w http.ResponseWriter, r *http.Request, body []byte)
	open     atomic.Int32
	maxOpen  atomic.Int32
	srv      *httptest.Server
	received chan struct{}
}

type pushed struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newEndpoint(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, body []byte)) *endpoint {
	e := &endpoint{answer: answer, received: make(chan struct{}, 1000)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := e.open.Add(1)
		defer e.open.Add(-1)
		for m := e.maxOpen.Load(); n > m && !e.maxOpen.CompareAndSwap(m, n); m = e.maxOpen.Load() {
		}
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.reqs = append(e.reqs, pushed{header: r.Header.Clone(), body: body, at: time.Now()})
		e.mu.Unlock()
		e.received <- struct{}{}
		e.answer(w, r, body)
	}))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *endpoint) requests() []pushed {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]pushed(nil), e.reqs...)
}

// pushQueue points queue at url and returns its signing secret.
func (b *testBundle) pushQueue(t *testing.T, queue, url string, mod ...func(*domain.QueueSettings)) string {
	t.Helper()
	st, err := b.store.UpdateQueue(b.ctx, queue, "test", func(q domain.QueueSettings) domain.QueueSettings {
		q = domain.QueuePatch{SetPush: true, Push: &domain.PushConfig{URL: url, TimeoutSeconds: 5}}.Apply(q)
		for _, m := range mod {
			m(&q)
		}
		return q
	})
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(st.Push.Secret, "whsec_"))
	return st.Push.Secret
}

// startPusher runs a pusher allowed to reach this machine until stop is
// called (or the test ends).
func (b *testBundle) startPusher(t *testing.T, cfg workers.PusherConfig) (p *workers.Pusher, stop func()) {
	t.Helper()
	cfg.WorkerID = "pusher-" + uuid.NewString()[:8]
	cfg.PollInterval = 50 * time.Millisecond
	cfg.HeartbeatInterval = 200 * time.Millisecond
	cfg.LeaseTTL = 2 * time.Second
	if cfg.Allow == nil {
		cfg.Allow = []string{"127.0.0.1"}
	}
	p, err := workers.NewPusher(cfg, b.store, quietLogger())
	require.NoError(t, err)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(b.ctx)
	go func() { defer close(done); _ = p.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return p, stop
}

// enqueueTo enqueues a job of any type into a push queue, checked as
// the API checks it (a push queue accepts every type).
func (b *testBundle) enqueueTo(t *testing.T, queue, typ, payload string) *jobs.Job {
	t.Helper()
	require.NoError(t, b.store.ReloadQueueSettings(b.ctx))
	c := domain.NewCatalog(b.registry, nil, nil)
	c.PushQueues(b.store.PushedQueue)
	p := jobs.EnqueueParams{Type: typ, Queue: queue, Payload: json.RawMessage(payload)}
	require.NoError(t, p.Validate(c, time.Now()))
	res, err := b.store.Enqueue(b.ctx, p)
	require.NoError(t, err)
	return res[0].Job
}

func (b *testBundle) waitJob(t *testing.T, id uuid.UUID, cond func(*jobs.Job) bool) *jobs.Job {
	t.Helper()
	var j *jobs.Job
	require.Eventually(t, func() bool {
		var err error
		j, err = b.store.GetJob(b.ctx, id)
		return err == nil && cond(j)
	}, 20*time.Second, 20*time.Millisecond)
	return j
}

// TestPushCompletesAndSigns: a push queue's job is POSTed with its
// fields, the Flint headers and a Standard Webhooks signature that the
// scheme's reference library verifies; a 2xx answer completes it with a
// JSON body as its result; a worker pool never takes the queue's jobs.
func TestPushCompletesAndSigns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"thumbnail": "ok"}`)
	})
	secret := b.pushQueue(t, "hooks", e.srv.URL+"/jobs?token=abc")
	require.NoError(t, b.store.ReloadQueueSettings(b.ctx))
	// A pool serving every queue and every type, running alongside.
	b.registry.Register("resize", jobs.HandlerFunc(func(context.Context, *jobs.Job) (any, error) { return nil, nil }))
	_, _ = b.start(t, workers.Config{Workers: 4})
	j := b.enqueueTo(t, "hooks", "resize", `{"w": 640}`)
	b.startPusher(t, workers.PusherConfig{})
	done := b.waitJob(t, j.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	require.JSONEq(t, `{"thumbnail": "ok"}`, string(done.Result))
	require.True(t, strings.HasPrefix(*done.WorkerID, "pusher-"), "pushed, not run by the pool: %s", *done.WorkerID)

	reqs := e.requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(r.body, r.header), "verified by the reference library")
	require.Equal(t, j.ID.String(), r.header.Get("webhook-id"))
	require.Equal(t, "1", r.header.Get("Flint-Attempt"))
	require.Equal(t, "hooks", r.header.Get("Flint-Queue"))
	require.Equal(t, "resize", r.header.Get("Flint-Type"))
	var body struct {
		ID         uuid.UUID       `json:"id"`
		Type       string          `json:"type"`
		Queue      string          `json:"queue"`
		Payload    json.RawMessage `json:"payload"`
		Attempt    int             `json:"attempt"`
		MaxRetries int             `json:"max_retries"`
		LeaseToken uuid.UUID       `json:"lease_token"`
	}
	require.NoError(t, json.Unmarshal(r.body, &body))
	require.Equal(t, j.ID, body.ID)
	require.Equal(t, "resize", body.Type)
	require.JSONEq(t, `{"w": 640}`, string(body.Payload))
	require.Equal(t, 1, body.Attempt)
	require.Equal(t, 3, body.MaxRetries)
	require.NotEqual(t, uuid.Nil, body.LeaseToken)

	var ds []domain.PushDelivery
	require.Eventually(t, func() bool {
		var err error
		ds, err = b.store.PushDeliveries(b.ctx, "hooks", 10)
		return err == nil && len(ds) == 1
	}, 10*time.Second, 20*time.Millisecond, "the delivery is recorded for the queue's page")
	require.Equal(t, domain.PushCompleted, ds[0].Outcome)
	require.Equal(t, http.StatusOK, ds[0].StatusCode)
}

// TestPushOutcomes: each kind of answer ends its job as the
// specification says.
func TestPushOutcomes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newEndpoint(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		var job struct {
			Payload struct {
				Answer string `json:"answer"`
			} `json:"payload"`
		}
		_ = json.Unmarshal(body, &job)
		switch job.Payload.Answer {
		case "500-retry-after":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, "database down password=hunter2")
		case "no-retry":
			w.Header().Set("Flint-No-Retry", "true")
			w.WriteHeader(http.StatusBadRequest)
		case "redirect":
			http.Redirect(w, r, "http://127.0.0.1:1/elsewhere", http.StatusFound)
		case "accepted":
			w.WriteHeader(http.StatusAccepted)
		case "slow":
			time.Sleep(3 * time.Second) // the scenario: an endpoint slower than the push timeout
		case "not-json":
			_, _ = io.WriteString(w, "plain thanks")
		}
	})
	b.pushQueue(t, "outcomes", e.srv.URL, func(q *domain.QueueSettings) { q.Push.TimeoutSeconds = 1 })
	enq := func(answer string) *jobs.Job {
		return b.enqueueTo(t, "outcomes", "anything", `{"answer": "`+answer+`"}`)
	}
	retry, noRetry, redirect, accepted, slow, notJSON := enq("500-retry-after"), enq("no-retry"), enq("redirect"), enq("accepted"), enq("slow"), enq("not-json")
	b.startPusher(t, workers.PusherConfig{})

	r := b.waitJob(t, retry.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateScheduled })
	require.WithinDuration(t, time.Now().Add(120*time.Second), r.RunAt, 15*time.Second, "Retry-After honoured")
	require.Contains(t, *r.LastError, "answered 500")
	require.NotContains(t, *r.LastError, "hunter2", "scrubbed")
	require.NotContains(t, *r.LastError, "token", "the URL's path and query are not quoted")

	require.Equal(t, jobs.StateDeadLetter, b.waitJob(t, noRetry.ID, func(j *jobs.Job) bool { return j.Status != jobs.StateRunning && j.Status != jobs.StateQueued }).Status)
	rd := b.waitJob(t, redirect.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateScheduled })
	require.Contains(t, *rd.LastError, "302", "a redirect is not followed")
	sl := b.waitJob(t, slow.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateScheduled })
	require.Contains(t, *sl.LastError, "no answer within 1s")
	nj := b.waitJob(t, notJSON.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	require.Empty(t, nj.Result, "a body that is not JSON is no result")

	// 202: the endpoint finishes it later with the lease token.
	token := e.leaseTokenOf(t, accepted.ID)
	require.NotEqual(t, uuid.Nil, token)
	ac := b.waitJob(t, accepted.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateRunning })
	require.Equal(t, token, *ac.LeaseToken)
	moved, _, err := b.store.FinishJobs(b.ctx, []domain.Finish{{Lease: domain.Lease{JobID: accepted.ID, Token: token}, Outcome: domain.OutcomeSucceeded}})
	require.NoError(t, err)
	require.Equal(t, jobs.StateCompleted, moved[0].Status)

	want := map[string]int{domain.PushRetry: 3, domain.PushFailed: 1, domain.PushAccepted: 1, domain.PushCompleted: 1}
	outcomes := map[string]int{}
	require.Eventually(t, func() bool {
		ds, err := b.store.PushDeliveries(b.ctx, "outcomes", 50)
		require.NoError(t, err)
		outcomes = map[string]int{}
		for _, d := range ds {
			outcomes[d.Outcome]++
		}
		return len(ds) >= 6
	}, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, want, outcomes)
}

// TestPushGoneAndHeld: a 410 fails the job for good and pauses the
// queue's push (nothing more is sent); a 429 holds the queue back for its
// Retry-After.
func TestPushGoneAndHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gone := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusGone) })
	var first atomic.Bool
	busy := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if first.CompareAndSwap(false, true) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	b.pushQueue(t, "gone", gone.srv.URL)
	b.pushQueue(t, "busy", busy.srv.URL, func(q *domain.QueueSettings) { c := 1; q.Concurrency = &c })
	g1 := b.enqueueTo(t, "gone", "x", `{}`)
	h1 := b.enqueueTo(t, "busy", "x", `{}`)
	p, _ := b.startPusher(t, workers.PusherConfig{})
	require.Equal(t, jobs.StateDeadLetter, b.waitJob(t, g1.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateDeadLetter }).Status)
	q, err := b.store.GetQueue(b.ctx, "gone")
	require.NoError(t, err)
	require.NotNil(t, q.Push.PausedAt, "410 pauses the push")
	g2 := b.enqueueTo(t, "gone", "x", `{}`)
	p.Wake("gone")

	held := b.waitJob(t, h1.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateScheduled })
	q, err = b.store.GetQueue(b.ctx, "busy")
	require.NoError(t, err)
	require.NotNil(t, q.Push.HeldUntil)
	h2 := b.enqueueTo(t, "busy", "x", `{}`)
	p.Wake("busy")
	<-busy.received // the 429
	b.waitJob(t, h2.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	reqs := busy.requests()
	require.GreaterOrEqual(t, reqs[1].at.Sub(reqs[0].at), 1900*time.Millisecond, "the queue was held for Retry-After")
	require.Equal(t, jobs.StateScheduled, held.Status)

	require.Len(t, gone.requests(), 1, "nothing is pushed to a gone endpoint")
	g2now, err := b.store.GetJob(b.ctx, g2.ID)
	require.NoError(t, err)
	require.Equal(t, jobs.StateQueued, g2now.Status)
}

// TestPushBoundedByQueueLimits: a push queue's concurrency bounds the
// requests open at once.
func TestPushBoundedByQueueLimits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		time.Sleep(100 * time.Millisecond) // the scenario: each push takes a while, so they overlap
		w.WriteHeader(http.StatusOK)
	})
	b.pushQueue(t, "limited", e.srv.URL, func(q *domain.QueueSettings) { c := 3; q.Concurrency = &c })
	var ids []uuid.UUID
	for range 20 {
		ids = append(ids, b.enqueueTo(t, "limited", "x", `{}`).ID)
	}
	b.startPusher(t, workers.PusherConfig{})
	for _, id := range ids {
		b.waitJob(t, id, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	}
	require.LessOrEqual(t, e.maxOpen.Load(), int32(3))
	require.GreaterOrEqual(t, e.maxOpen.Load(), int32(2), "requests ran side by side up to the limit")
}

// TestPushSSRFAndRotation: without an allow list the guard refuses this
// machine's address; a rotation signs with both secrets until the old is
// revoked.
func TestPushSSRFAndRotation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusOK) })
	old := b.pushQueue(t, "rot", e.srv.URL)
	refused := b.enqueueTo(t, "rot", "x", `{}`)
	_, stopStrict := b.startPusher(t, workers.PusherConfig{Allow: []string{"192.0.2.1"}})
	r := b.waitJob(t, refused.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateScheduled })
	require.Contains(t, *r.LastError, "is blocked")
	require.Contains(t, *r.LastError, "FLINT_HTTP_ALLOW")
	require.Empty(t, e.requests())
	stopStrict()

	p, _ := b.startPusher(t, workers.PusherConfig{})
	fresh, err := b.store.RotatePushSecret(b.ctx, "rot", "test")
	require.NoError(t, err)
	_, err = b.store.RotatePushSecret(b.ctx, "rot", "test")
	require.ErrorIs(t, err, domain.ErrPreviousSecret)
	// Every process hears of a rotation (the listener calls Reload); a
	// push already under way may still carry the old signature alone.
	p.Reload()
	var last pushed
	require.Eventually(t, func() bool {
		j := b.enqueueTo(t, "rot", "x", `{}`)
		b.waitJob(t, j.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
		last = e.requests()[len(e.requests())-1]
		return len(strings.Fields(last.header.Get("webhook-signature"))) == 2
	}, 10*time.Second, 10*time.Millisecond)
	for _, secret := range []string{old, fresh} {
		wh, err := standardwebhooks.NewWebhook(secret)
		require.NoError(t, err)
		require.NoError(t, wh.Verify(last.body, last.header), "signed with both secrets while rotating")
	}
	require.Len(t, strings.Fields(last.header.Get("webhook-signature")), 2)
	require.NoError(t, b.store.RevokePushSecret(b.ctx, "rot", "test"))
	require.ErrorIs(t, b.store.RevokePushSecret(b.ctx, "rot", "test"), domain.ErrNoPreviousSecret)
	p.Reload()
	wh, err := standardwebhooks.NewWebhook(old)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		j := b.enqueueTo(t, "rot", "x", `{}`)
		b.waitJob(t, j.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
		last = e.requests()[len(e.requests())-1]
		return wh.Verify(last.body, last.header) != nil
	}, 10*time.Second, 10*time.Millisecond, "the revoked secret no longer signs")
	wn, err := standardwebhooks.NewWebhook(fresh)
	require.NoError(t, err)
	require.NoError(t, wn.Verify(last.body, last.header))
}

// leaseTokenOf returns the lease token pushed with job id, or uuid.Nil
// when it was not pushed.
func (e *endpoint) leaseTokenOf(t *testing.T, id uuid.UUID) uuid.UUID {
	t.Helper()
	var token uuid.UUID
	for _, p := range e.requests() {
		var job struct {
			ID         uuid.UUID `json:"id"`
			LeaseToken uuid.UUID `json:"lease_token"`
		}
		require.NoError(t, json.Unmarshal(p.body, &job))
		if job.ID == id {
			token = job.LeaseToken
		}
	}
	return token
}
