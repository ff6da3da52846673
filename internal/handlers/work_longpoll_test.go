package handlers_test

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/jobs"
)

// TestPullWorkerLongPoll: a claim that waits is answered as soon as a job
// arrives, without a database connection held while it waits; one that
// times out answers an empty list; the API accepts a remote worker's
// type once it has registered.
func TestPullWorkerLongPoll(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	var e errBody
	require.Equal(t, http.StatusUnprocessableEntity, r.call(t, apiKey, http.MethodPost, "/api/v1/jobs", `{"type": "py.slow"}`, &e))
	id := r.register(t, apiKey, `{"types": ["py.slow"]}`)

	start := time.Now()
	var got claimed
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"wait_seconds": 0.3}`, &got))
	require.Empty(t, got.Jobs)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	done := make(chan time.Time, 1)
	go func() {
		var got claimed
		r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"wait_seconds": 20}`, &got)
		if len(got.Jobs) == 1 {
			done <- time.Now()
		}
		close(done)
	}()
	require.Eventually(t, func() bool { return r.hub.Waiting() == 1 }, 10*time.Second, 5*time.Millisecond)
	idle := r.store.Pool().Stat().AcquiredConns()
	require.Zero(t, idle, "the waiting claim holds no connection")
	var job map[string]any
	enqueued := time.Now()
	require.Eventually(t, func() bool {
		return r.call(t, apiKey, http.MethodPost, "/api/v1/jobs", `{"type": "py.slow"}`, &job) == http.StatusCreated
	}, 5*time.Second, 50*time.Millisecond, "the API accepts a type a registered worker serves")
	at, ok := <-done
	require.True(t, ok, "the waiting claim got the job")
	require.Less(t, at.Sub(enqueued), 5*time.Second)
}

// TestManyIdleLongPolls: a thousand claims waiting at once hold no
// connection; the API keeps answering and a job enqueued meanwhile goes
// to exactly one of them. The claims wait as long as a claim may (30 s),
// so that all of them are waiting at once however slowly a busy machine
// starts them, and the worker is quieted once the job is taken, which
// ends the others at once.
func TestManyIdleLongPolls(t *testing.T) {
	t.Parallel()
	r := workSetup(t)
	id := r.register(t, apiKey, `{"types": ["py.idle"]}`)
	const n = 1000
	var wg sync.WaitGroup
	results := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var got claimed
			r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"wait_seconds": 30}`, &got)
			results <- len(got.Jobs)
		}()
	}
	require.Eventually(t, func() bool { return r.hub.Waiting() == n }, 25*time.Second, 10*time.Millisecond,
		"every claim waits at once")
	require.LessOrEqual(t, r.store.Pool().Stat().AcquiredConns(), int32(0))
	for i := range 20 {
		// A claim that held a connection would starve these for as long
		// as the claims wait (30 s).
		start := time.Now()
		require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodGet, "/api/v1/stats", nil, nil), "request %d", i)
		require.Less(t, time.Since(start), 10*time.Second, "the API answers while a thousand claims wait")
	}
	r.enqueue(t, jobs.EnqueueParams{Type: "py.idle"})
	r.hub.Wake("default")
	total, answered := 0, 0
	for total == 0 {
		select {
		case k := <-results:
			total += k
			answered++
		case <-time.After(30 * time.Second):
			t.Fatalf("no waiting claim took the job (%d answered empty)", answered)
		}
	}
	require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/quiet", nil, nil))
	wg.Wait()
	close(results)
	for k := range results {
		total += k
	}
	require.Equal(t, 1, total, fmt.Sprintf("one job, claimed once among %d waiting claims", n))
}

// TestLongPollEndsWhenTheWorkerMayNotClaim: a claim waiting for work ends
// at once, empty, when its worker is deregistered or asked to quiet down or
// terminate, and claims nothing that arrives afterwards. (A worker that
// stops breaks its own long poll off, and the API cannot tell; the poll
// must not go on to take jobs for a worker that is gone.)
func TestLongPollEndsWhenTheWorkerMayNotClaim(t *testing.T) {
	t.Parallel()
	for _, stop := range []string{"deregister", "quiet", "terminate"} {
		t.Run(stop, func(t *testing.T) {
			t.Parallel()
			r := workSetup(t)
			id := r.register(t, apiKey, `{"types": ["py.poll"]}`)
			answered := make(chan claimed, 1)
			go func() {
				var got claimed
				r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/claim", `{"wait_seconds": 20}`, &got)
				answered <- got
			}()
			require.Eventually(t, func() bool { return r.hub.Waiting() == 1 }, 10*time.Second, 5*time.Millisecond)
			if stop == "deregister" {
				require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodDelete, "/api/v1/workers/"+id, nil, nil))
			} else {
				require.Equal(t, http.StatusOK, r.call(t, apiKey, http.MethodPost, "/api/v1/workers/"+id+"/"+stop, nil, nil))
			}
			select {
			case got := <-answered:
				require.Empty(t, got.Jobs)
			case <-time.After(5 * time.Second):
				// Still waiting: a job arriving now must not go to it.
				j := r.enqueue(t, jobs.EnqueueParams{Type: "py.poll"})[0]
				r.hub.Wake("")
				got := <-answered
				require.Empty(t, got.Jobs, "claimed for a worker that may not claim")
				require.Equal(t, jobs.StateQueued, r.job(t, j.ID).Status)
				t.Fatal("the long poll went on waiting after " + stop)
			}
		})
	}
}
