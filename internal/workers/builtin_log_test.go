package workers_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// jobLog waits until a job has at least n stored log lines and returns
// them.
func (b *testBundle) jobLog(t *testing.T, id uuid.UUID, n int) []domain.LogEntry {
	t.Helper()
	var lines []domain.LogEntry
	require.Eventually(t, func() bool {
		var err error
		lines, err = b.store.JobLogs(b.ctx, id, 0, 100)
		require.NoError(t, err)
		return len(lines) >= n
	}, 20*time.Second, 20*time.Millisecond, "job %s logged %d of %d lines", id, len(lines), n)
	return lines
}

// The built-in http_request handler logs what it sent and what came back
// (the query string, which may hold secrets, left out), success or not.
func TestHTTPRequestWritesItsLog(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/down" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(srv.Close)
	b := setup(t)
	b.registry = jobs.NewRegistry()
	domain.RegisterBuiltins(b.registry, domain.BuiltinDeps{HTTP: domain.HTTPConfig{Allow: []string{srv.Listener.Addr().String()}}})
	zero := 0
	ok := b.enqueue(t, jobs.TypeHTTPRequest, fmt.Sprintf(`{"method":"POST","url":%q,"body":"hello"}`, srv.URL+"/hook?token=s3cret"))
	down := b.enqueue(t, jobs.TypeHTTPRequest, fmt.Sprintf(`{"url":%q}`, srv.URL+"/down"),
		func(p *jobs.EnqueueParams) { p.MaxRetries = &zero })
	b.start(t, workers.Config{Workers: 2})

	b.waitFor(t, ok.ID, 20*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	lines := b.jobLog(t, ok.ID, 2)
	require.Len(t, lines, 2)
	shown := "POST " + srv.URL + "/hook?…"
	require.Equal(t, "sending "+shown, lines[0].Message)
	require.EqualValues(t, 5, lines[0].Attrs["body_bytes"])
	require.Equal(t, shown+" answered 201", lines[1].Message)
	require.EqualValues(t, 201, lines[1].Attrs["status"])
	require.EqualValues(t, 11, lines[1].Attrs["bytes"])
	for _, l := range lines {
		require.Equal(t, "info", l.Level)
		require.Equal(t, 1, l.Attempt)
		require.NotContains(t, l.Message, "s3cret")
	}

	b.waitFor(t, down.ID, 20*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateDeadLetter })
	lines = b.jobLog(t, down.ID, 2)
	require.Equal(t, "sending GET "+srv.URL+"/down", lines[0].Message)
	require.Equal(t, "GET "+srv.URL+"/down answered 503", lines[1].Message)
	require.EqualValues(t, 503, lines[1].Attrs["status"])
}

// The built-in send_email handler logs the message it sends, to whom, and
// what the mail server said, against a real SMTP server (Mailpit).
func TestSendEmailWritesItsLog(t *testing.T) {
	t.Parallel()
	smtpURL := os.Getenv("TEST_SMTP_URL")
	if smtpURL == "" {
		smtpURL = "smtp://127.0.0.1:1025"
	}
	mailer, err := workers.NewSMTPMailer(workers.SMTPConfig{URL: smtpURL, From: "Flint Test <flint-test@example.test>",
		Timeout: 10 * time.Second})
	require.NoError(t, err)
	host := strings.TrimPrefix(strings.TrimPrefix(smtpURL, "smtp://"), "smtps://")
	if c, err := net.DialTimeout("tcp", host, 3*time.Second); err != nil {
		t.Fatalf("this test needs an SMTP server such as Mailpit at %s (TEST_SMTP_URL): %v", smtpURL, err)
	} else {
		_ = c.Close()
	}
	b := setup(t)
	b.registry = jobs.NewRegistry()
	domain.RegisterBuiltins(b.registry, domain.BuiltinDeps{Mailer: mailer})
	j := b.enqueue(t, jobs.TypeSendEmail, `{"to":["ops@example.test","dev@example.test"],"subject":"Nightly export done","text":"ok"}`)
	b.start(t, workers.Config{Workers: 1})

	b.waitFor(t, j.ID, 30*time.Second, func(j *jobs.Job) bool { return j.Status == jobs.StateCompleted })
	lines := b.jobLog(t, j.ID, 2)
	require.Len(t, lines, 2)
	require.Equal(t, `sending "Nightly export done" to 2 recipient(s)`, lines[0].Message)
	require.Equal(t, "ops@example.test, dev@example.test", lines[0].Attrs["to"])
	require.Equal(t, "the mail server accepted the message", lines[1].Message)
	for _, l := range lines {
		require.Equal(t, "info", l.Level)
		require.Equal(t, 1, l.Attempt)
	}
}
