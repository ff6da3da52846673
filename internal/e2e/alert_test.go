package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// mailpitAPI returns the Mailpit API base and a mailer for its SMTP port.
func mailpitAPI(t *testing.T) (string, *workers.SMTPMailer) {
	t.Helper()
	smtpURL := os.Getenv("TEST_SMTP_URL")
	api := os.Getenv("TEST_MAILPIT_URL")
	if smtpURL == "" || api == "" {
		if testing.Short() {
			t.Skip("TEST_SMTP_URL / TEST_MAILPIT_URL unset")
		}
		t.Fatal("TEST_SMTP_URL and TEST_MAILPIT_URL must point at a Mailpit (make test sets them)")
	}
	m, err := workers.NewSMTPMailer(workers.SMTPConfig{URL: smtpURL, From: "Flint <alerts@example.test>"})
	require.NoError(t, err)
	return strings.TrimRight(api, "/"), m
}

type mailpitMsg struct {
	ID      string
	Subject string
	Text    string
	HTML    string
	To      []struct{ Address string }
}

// mailbox returns the messages addressed to addr, fetched whole.
func mailbox(t *testing.T, api, addr string) []mailpitMsg {
	t.Helper()
	var res struct {
		Messages []struct{ ID string } `json:"messages"`
	}
	getJSON(t, api+"/api/v1/search?query="+url.QueryEscape(`to:"`+addr+`"`), &res)
	var out []mailpitMsg
	for _, m := range res.Messages {
		var msg mailpitMsg
		getJSON(t, api+"/api/v1/message/"+url.PathEscape(m.ID), &msg)
		out = append(out, msg)
	}
	return out
}

func getJSON(t *testing.T, u string, v any) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, u)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// deadLetters puts n jobs in the DLQ at once, from n goroutines, each
// failing with the given error.
func deadLetters(t *testing.T, store *db.Store, n int, errText string) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	zero := 0
	queue := "dlq-" + uuid.NewString()[:8]
	params := make([]jobs.EnqueueParams, n)
	for i := range params {
		params[i] = jobs.EnqueueParams{Type: jobs.TypeNoop, MaxRetries: &zero, Queue: queue}
	}
	_, err := store.Enqueue(ctx, params...)
	require.NoError(t, err)
	claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Queues: []string{queue}, Limit: n, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Len(t, claimed, n)
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, n)
	for i, j := range claimed {
		ids[i] = j.ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := store.FinishJobs(ctx, []domain.Finish{{Lease: domain.LeaseOf(j), Outcome: domain.OutcomeFailed, Error: errText}})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	return ids
}

func alertSettings(t *testing.T, store *db.Store, to string, threshold, cooldown int) *domain.SettingsHolder {
	t.Helper()
	st, _, err := store.UpdateSettings(context.Background(), map[string]json.RawMessage{
		"alert_emails":           json.RawMessage(fmt.Sprintf(`[%q]`, to)),
		"dlq_threshold":          json.RawMessage(fmt.Sprint(threshold)),
		"alert_cooldown_seconds": json.RawMessage(fmt.Sprint(cooldown)),
	}, "test")
	require.NoError(t, err)
	h := &domain.SettingsHolder{}
	h.Set(st)
	return h
}

// TestDLQAlertEndToEnd: a storm of failures, three alerters racing in as
// many "processes", one email in Mailpit with the count, the threshold, the
// ten latest jobs (escaped, secrets scrubbed) and the link; a second email
// only once the cooldown has passed and a new job has failed.
func TestDLQAlertEndToEnd(t *testing.T) {
	t.Parallel()
	api, mailer := mailpitAPI(t)
	store, _ := dbtest.NewStore(t)
	to := fmt.Sprintf("ops-%s@example.test", uuid.NewString())
	settings := alertSettings(t, store, to, 3, 3600)
	ids := deadLetters(t, store, 12, `upstream said <script>alert(1)</script>; retry with password=hunter2`)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alerters []*countedPasses
	for range 3 {
		counted := &countedPasses{AlerterStore: store}
		alerters = append(alerters, counted)
		a := scheduler.NewAlerter(scheduler.AlerterConfig{Interval: 50 * time.Millisecond, PublicURL: "https://flint.example.test"},
			counted, notifier(t, mailer, settings), settings, quietLogger())
		go func() { _ = a.Run(ctx) }()
	}
	// A wrong second email would be sent by a later pass of an alerter.
	passesLater := func() {
		t.Helper()
		marks := make([]int64, len(alerters))
		for i, a := range alerters {
			marks[i] = a.passes.Load()
		}
		waitFor(t, 20*time.Second, "every alerter to make two more passes", func() bool {
			for i, a := range alerters {
				if a.passes.Load() < marks[i]+2 { // the second began after the mark
					return false
				}
			}
			return true
		})
	}
	require.Eventually(t, func() bool { return len(mailbox(t, api, to)) >= 1 }, 20*time.Second, 100*time.Millisecond)
	passesLater()
	msgs := mailbox(t, api, to)
	require.Len(t, msgs, 1, "one alert per cooldown window, however many processes")
	m := msgs[0]
	require.Equal(t, "Flint: 12 jobs in the dead-letter queue (threshold 3)", m.Subject)
	require.Contains(t, m.HTML, "https://flint.example.test/dlq")
	require.Contains(t, m.Text, "https://flint.example.test/dlq")
	require.Equal(t, 10, strings.Count(m.HTML, "<tr style=\"border-top"), "the ten most recent jobs")
	shown := 0
	for _, id := range ids {
		if strings.Contains(m.HTML, id.String()) {
			shown++
		}
	}
	require.Equal(t, 10, shown)
	require.Contains(t, m.HTML, "&lt;script&gt;alert(1)&lt;/script&gt;", "job data is escaped")
	require.NotContains(t, m.HTML, "<script>")
	require.NotContains(t, m.HTML, "hunter2", "secrets are scrubbed")
	require.NotContains(t, m.Text, "hunter2")

	// More failures within the window: no new email.
	deadLetters(t, store, 2, "again")
	passesLater()
	require.Len(t, mailbox(t, api, to), 1)

	// After the cooldown, the next failure alerts again.
	_, err := store.Pool().Exec(context.Background(), `UPDATE loop_leases SET last_run_at = now() - interval '2 hours' WHERE name = 'dlq_alert'`)
	require.NoError(t, err)
	deadLetters(t, store, 1, "once more")
	require.Eventually(t, func() bool { return len(mailbox(t, api, to)) == 2 }, 20*time.Second, 100*time.Millisecond)
}

// TestDLQAlertSurvivesSMTPOutage: with the SMTP server unreachable the
// alert waits in the outbox and is retried; nothing else is held up; once
// the server answers it is delivered.
func TestDLQAlertSurvivesSMTPOutage(t *testing.T) {
	t.Parallel()
	api, mailer := mailpitAPI(t)
	store, _ := dbtest.NewStore(t)
	to := fmt.Sprintf("ops-%s@example.test", uuid.NewString())
	settings := alertSettings(t, store, to, 1, 3600)
	deadLetters(t, store, 2, "boom")
	down, err := workers.NewSMTPMailer(workers.SMTPConfig{URL: "smtp://127.0.0.1:1/?starttls=none", Timeout: time.Second})
	require.NoError(t, err)

	a := scheduler.NewAlerter(scheduler.AlerterConfig{}, store, notifier(t, down, settings), settings, quietLogger())
	ctx := context.Background()
	start := time.Now()
	runAlerterOnce(t, a)
	require.Less(t, time.Since(start), 10*time.Second)
	out, err := store.AlertOutbox(ctx, 5)
	require.NoError(t, err)
	require.Len(t, out, 1)
	require.Nil(t, out[0].SentAt)
	require.Equal(t, 1, out[0].Attempts)
	require.NotEmpty(t, out[0].LastError)

	// Jobs keep flowing meanwhile.
	res, err := store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop})
	require.NoError(t, err)
	claimed, err := store.ClaimJobs(ctx, domain.ClaimParams{WorkerID: "w", Limit: 1, LeaseTTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, res[0].Job.ID, claimed[0].ID)

	// The retry is due (time passes), and the server is back.
	_, err = store.Pool().Exec(ctx, `UPDATE alert_outbox SET next_attempt_at = now()`)
	require.NoError(t, err)
	up := scheduler.NewAlerter(scheduler.AlerterConfig{}, store, notifier(t, mailer, settings), settings, quietLogger())
	runAlerterOnce(t, up)
	require.Eventually(t, func() bool { return len(mailbox(t, api, to)) == 1 }, 10*time.Second, 100*time.Millisecond)
	out, err = store.AlertOutbox(ctx, 5)
	require.NoError(t, err)
	require.NotNil(t, out[0].SentAt)
	require.Equal(t, 2, out[0].Attempts)
}

// notifier delivers through mailer, and to webhooks on this machine.
func notifier(t *testing.T, mailer domain.Mailer, settings *domain.SettingsHolder) *scheduler.Notifier {
	t.Helper()
	sender, err := workers.NewAlertSender(mailer, []string{"127.0.0.1"}, 5*time.Second)
	require.NoError(t, err)
	return scheduler.NewNotifier(scheduler.NotifierConfig{PublicURL: "https://flint.example.test"}, sender, settings)
}

// runAlerterOnce runs an alerter for one pass.
func runAlerterOnce(t *testing.T, a *scheduler.Alerter) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = a.Run(ctx)
}

// countedPasses counts an alerter's passes: each ends with sending what is
// due.
type countedPasses struct {
	scheduler.AlerterStore
	passes atomic.Int64
}

func (s *countedPasses) SendDueAlerts(ctx context.Context, maxAttempts int, send func(context.Context, domain.Notification) error) (int, error) {
	defer s.passes.Add(1)
	return s.AlerterStore.SendDueAlerts(ctx, maxAttempts, send)
}
