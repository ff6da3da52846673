package workers_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// TestPushBadAnswerFailsOnlyItsJob: an endpoint answering 200 with JSON
// that PostgreSQL cannot store (invalid UTF-8) fails its own jobs with
// the reason; the healthy queue's jobs, whose outcomes are written in the
// same batches, each complete after exactly one delivery.
func TestPushBadAnswerFailsOnlyItsJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var mu sync.Mutex
	deliveries := map[uuid.UUID]int{}
	count := func(body []byte) {
		var j struct {
			ID uuid.UUID `json:"id"`
		}
		_ = json.Unmarshal(body, &j)
		mu.Lock()
		deliveries[j.ID]++
		mu.Unlock()
	}
	good := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		count(body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true}`)
	})
	bad := newEndpoint(t, func(w http.ResponseWriter, _ *http.Request, body []byte) {
		count(body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, "{\"x\": \"\xff\xfe\"}")
	})
	b.pushQueue(t, "healthy", good.srv.URL+"/")
	b.pushQueue(t, "broken", bad.srv.URL+"/")
	var healthy, broken []*jobs.Job
	for i := range 63 {
		if i%21 == 20 {
			broken = append(broken, b.enqueueTo(t, "broken", "thumb", `{}`))
		} else {
			healthy = append(healthy, b.enqueueTo(t, "healthy", "thumb", `{}`))
		}
	}
	b.startPusher(t, workers.PusherConfig{})
	for _, j := range broken {
		got := b.waitJob(t, j.ID, func(j *jobs.Job) bool { return j.LastError != nil })
		require.Contains(t, *got.LastError, "the result was refused")
		require.Contains(t, *got.LastError, "not valid UTF-8")
		require.Nil(t, got.Result)
	}
	for _, j := range healthy {
		got := b.waitJob(t, j.ID, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
		require.JSONEq(t, `{"ok": true}`, string(got.Result))
		require.Zero(t, got.Interruptions)
		require.Equal(t, 1, got.Executions)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, j := range healthy {
		require.Equal(t, 1, deliveries[j.ID], "job %s was delivered more than once", j.ID)
	}
}

// TestPushErrorsDoNotQuoteTheURL: with the endpoint down, the errors a
// push leaves (the job's, its executions', its log lines, the queue's
// deliveries) name the endpoint by scheme and host, never by the path
// and query that carry its credentials.
func TestPushErrorsDoNotQuoteTheURL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens: connection refused
	secretURL := "http://" + addr + "/services/T0AAAA/B0BBBB/XyZpathTok123?sv=2022&sig=AzSasSig123"
	b.pushQueue(t, "hooks", secretURL)
	j := b.enqueueTo(t, "hooks", "thumb", `{}`)
	b.startPusher(t, workers.PusherConfig{})
	got := b.waitJob(t, j.ID, func(j *jobs.Job) bool { return j.LastError != nil })
	require.Contains(t, *got.LastError, "http://"+addr)
	require.Contains(t, *got.LastError, "refused")
	texts := []string{*got.LastError}
	execs, err := b.store.ListExecutions(b.ctx, got)
	require.NoError(t, err)
	require.NotEmpty(t, execs)
	for _, e := range execs {
		if e.Error != nil {
			texts = append(texts, *e.Error)
		}
	}
	lines, err := b.store.JobLogs(b.ctx, j.ID, 0, 100)
	require.NoError(t, err)
	for _, l := range lines {
		texts = append(texts, l.Message)
	}
	q, err := b.store.GetQueue(b.ctx, "hooks")
	require.NoError(t, err)
	for _, d := range q.RecentDeliveries {
		texts = append(texts, d.Error)
	}
	for _, text := range texts {
		for _, secret := range []string{"XyZpathTok123", "AzSasSig123", "T0AAAA", "sv=2022"} {
			require.False(t, strings.Contains(text, secret), "%q quotes the push URL", text)
		}
	}
}
