package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/db"
	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/scheduler"
	"github.com/flinthq/flint/internal/workers"
	"github.com/flinthq/flint/jobs"
)

// hookReceiver is a real HTTP endpoint standing in for Slack: it answers
// with the status it is told and keeps every request.
type hookReceiver struct {
	mu     sync.Mutex
	status int
	got    []hookRequest
}

type hookRequest struct {
	body     []byte
	header   http.Header
	delivery string
	ctype    string
}

func (h *hookReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.got = append(h.got, hookRequest{body: body, header: r.Header.Clone(),
		delivery: r.Header.Get("X-Flint-Delivery"), ctype: r.Header.Get("Content-Type")})
	w.WriteHeader(h.status)
	_, _ = io.WriteString(w, "ok")
}

func (h *hookReceiver) setStatus(s int) {
	h.mu.Lock()
	h.status = s
	h.mu.Unlock()
}

func (h *hookReceiver) requests() []hookRequest {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookRequest(nil), h.got...)
}

// slackMessage is what a Slack incoming webhook reads, plus Flint's facts.
type slackMessage struct {
	Text  string `json:"text"`
	Flint struct {
		Event    string  `json:"event"`
		RuleName string  `json:"rule_name"`
		Subject  string  `json:"subject"`
		Value    float64 `json:"value"`
		Message  string  `json:"message"`
	} `json:"flint"`
}

// verify checks a delivery's signature the way a receiver would.
func verify(t *testing.T, secret string, r hookRequest) slackMessage {
	t.Helper()
	// The Standard Webhooks reference library, not Flint's own code.
	wh, err := standardwebhooks.NewWebhook(secret)
	require.NoError(t, err)
	require.NoError(t, wh.Verify(r.body, r.header))
	if r.delivery == "" { // a test send: a message id of its own
		require.Regexp(t, `^test-[0-9a-f-]{36}$`, r.header.Get("webhook-id"))
	} else {
		require.Equal(t, "alert-"+r.delivery, r.header.Get("webhook-id"), "retries of a delivery share its message id")
	}
	require.Equal(t, "application/json", r.ctype)
	var m slackMessage
	require.NoError(t, json.Unmarshal(r.body, &m))
	return m
}

// expireAlertTurn makes the next evaluation due, and every outbox retry.
func expireAlertTurn(t *testing.T, store *db.Store) {
	t.Helper()
	_, err := store.Pool().Exec(context.Background(), `
		UPDATE loop_leases SET last_run_at = '-infinity' WHERE name = 'alert_rules';
		UPDATE alert_outbox SET next_attempt_at = now() WHERE sent_at IS NULL AND failed_at IS NULL`)
	require.NoError(t, err)
}

// TestAlertRuleWebhookAndEmailEndToEnd: a queue stops being served; the
// rule fires once to Mailpit and to a webhook that first fails (so the
// outbox retries it), stays quiet inside its cooldown, and says "resolved"
// on both channels when a worker comes back.
func TestAlertRuleWebhookAndEmailEndToEnd(t *testing.T) {
	t.Parallel()
	api, mailer := mailpitAPI(t)
	store, _ := dbtest.NewStore(t)
	ctx := context.Background()
	to := fmt.Sprintf("oncall-%s@example.test", uuid.NewString())
	hook := &hookReceiver{status: http.StatusServiceUnavailable}
	srv := httptest.NewServer(hook)
	defer srv.Close()

	rule := domain.NewAlertRule(domain.AlertNoWorker)
	rule.Name, rule.Queue, rule.GraceSeconds = "imports <orphaned>", "imports", 60
	rule.Emails, rule.WebhookURL, rule.WebhookSecret = []string{to}, srv.URL+"/slack", domain.NewWebhookSecret()
	require.NoError(t, rule.Validate())
	rule, err := store.CreateAlertRule(ctx, rule)
	require.NoError(t, err)

	_, err = store.Enqueue(ctx, jobs.EnqueueParams{Type: jobs.TypeNoop, Queue: "imports"})
	require.NoError(t, err)
	_, err = store.Pool().Exec(ctx, `UPDATE jobs SET run_at = now() - interval '10 minutes'`)
	require.NoError(t, err)

	settings := &domain.SettingsHolder{}
	a := scheduler.NewAlerter(scheduler.AlerterConfig{RuleInterval: time.Hour}, store, notifier(t, mailer, settings), settings, quietLogger())
	runAlerterOnce(t, a)

	// The email went out at once; the webhook failed and waits for a retry.
	require.Eventually(t, func() bool { return len(mailbox(t, api, to)) == 1 }, 10*time.Second, 100*time.Millisecond)
	msg := mailbox(t, api, to)[0]
	require.Equal(t, "Flint alert firing: imports <orphaned> (imports)", msg.Subject)
	require.Contains(t, msg.Text, "no live worker serves this queue")
	require.Contains(t, msg.HTML, "imports &lt;orphaned&gt;", "the HTML part escapes the rule name")
	require.Len(t, hook.requests(), 1)
	out, err := store.AlertOutbox(ctx, 10)
	require.NoError(t, err)
	byChannel := map[string]domain.AlertRecord{}
	for _, o := range out {
		byChannel[o.Channel] = o
	}
	require.NotNil(t, byChannel["email"].SentAt)
	require.Nil(t, byChannel["webhook"].SentAt)
	require.Contains(t, byChannel["webhook"].LastError, "503")

	// The receiver recovers: the retry delivers the same notification.
	hook.setStatus(http.StatusOK)
	expireAlertTurn(t, store)
	runAlerterOnce(t, a)
	got := hook.requests()
	require.Len(t, got, 2)
	require.Equal(t, got[0].body, got[1].body, "a retry sends the same body")
	require.Equal(t, got[0].delivery, got[1].delivery, "and the same delivery id, so a receiver can drop duplicates")
	m := verify(t, rule.WebhookSecret, got[1])
	require.Equal(t, "firing", m.Flint.Event)
	require.Equal(t, "imports", m.Flint.Subject)
	require.Contains(t, m.Text, "imports &lt;orphaned&gt;", "Slack markup characters are escaped")
	require.Contains(t, m.Text, "<https://flint.example.test/alerts|Open the Alerts page>")
	require.Len(t, mailbox(t, api, to), 1, "the condition holds, inside the cooldown: nothing more")

	// A worker serves the queue again: resolved, on both channels.
	require.NoError(t, store.RegisterWorker(ctx, domain.WorkerInfo{ID: "w-back", Host: "h", PID: 1, Queues: []string{"imports"},
		Concurrency: 1, Version: "test", StartedAt: time.Now()}, time.Minute))
	expireAlertTurn(t, store)
	runAlerterOnce(t, a)
	require.Eventually(t, func() bool { return len(mailbox(t, api, to)) == 2 }, 10*time.Second, 100*time.Millisecond)
	got = hook.requests()
	require.Len(t, got, 3)
	require.Equal(t, "resolved", verify(t, rule.WebhookSecret, got[2]).Flint.Event)
	alerts, err := store.ListAlerts(ctx, domain.AlertQuery{RuleID: rule.ID})
	require.NoError(t, err)
	require.Len(t, alerts, 1)
	require.NotNil(t, alerts[0].ResolvedAt)
}

// TestAlertWebhookSSRFGuard: a webhook aimed at a private address is
// refused at delivery unless FLINT_HTTP_ALLOW opens it, like http_request.
func TestAlertWebhookSSRFGuard(t *testing.T) {
	t.Parallel()
	hook := &hookReceiver{status: http.StatusOK}
	srv := httptest.NewServer(hook)
	defer srv.Close()
	sender, err := workers.NewAlertSender(nil, nil, 5*time.Second)
	require.NoError(t, err)
	n := scheduler.NewNotifier(scheduler.NotifierConfig{}, sender, nil)
	rule := domain.NewAlertRule(domain.AlertNoWorker)
	rule.Name, rule.WebhookURL, rule.WebhookSecret = "guarded", srv.URL, "0123456789abcdef"
	res := n.SendTest(context.Background(), rule)
	require.Len(t, res, 1)
	require.False(t, res[0].OK)
	require.Contains(t, res[0].Error, "FLINT_HTTP_ALLOW")
	require.Empty(t, hook.requests(), "nothing reached the private address")

	for _, target := range []string{"http://169.254.169.254/latest/meta-data", "http://[::1]:80/", "http://10.0.0.1/"} {
		rule.WebhookURL = target
		res := n.SendTest(context.Background(), rule)
		require.False(t, res[0].OK, target)
		require.Contains(t, res[0].Error, "webhook", target)
	}
}
