package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	htmltemplate "html/template"
	"log/slog"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
)

// AlerterStore is what the alerter needs; *db.Store implements it.
type AlerterStore interface {
	// ClaimDLQAlert puts the DLQ alert that build makes in the outbox when
	// one is due (threshold reached, cooldown past) and reports whether it
	// did; of several processes asking at once, one gets true.
	ClaimDLQAlert(ctx context.Context, threshold int, cooldown time.Duration, build func(domain.DLQSnapshot) (domain.Email, error)) (bool, error)
	// SendDueAlerts hands each due outbox notification to send, recording
	// it sent, or to retry later, or given up after maxAttempts; it stops
	// at the first failure and returns how many were sent.
	SendDueAlerts(ctx context.Context, maxAttempts int, send func(context.Context, domain.Notification) error) (int, error)
	// EvaluateAlertRules evaluates the enabled rules at most once per
	// interval across the cluster, queueing what render makes of each
	// alert opened, repeated or resolved; it returns whether this call
	// evaluated and how many notifications it queued.
	EvaluateAlertRules(ctx context.Context, interval time.Duration, render func(domain.AlertNotice) ([]domain.Notification, error)) (bool, int, error)
}

// AlerterConfig configures an Alerter.
type AlerterConfig struct {
	// Interval between checks; zero means 5 s. Kick checks at once.
	Interval time.Duration
	// RuleInterval is how often the alert rules are evaluated across the
	// cluster; zero means 30 s.
	RuleInterval time.Duration
	// PublicURL is the dashboard's address for the link in the email;
	// zero means http://localhost:8080.
	PublicURL string
	// MaxAttempts before an alert is given up; zero means 10.
	MaxAttempts int
	// SendTimeout bounds one delivery; zero means 30 s.
	SendTimeout time.Duration
}

// Alerter emails the alert_emails setting when jobs have entered the DLQ
// and it holds at least dlq_threshold jobs: at most one alert per
// alert_cooldown_seconds across every process (the database decides), the
// email first written to an outbox and then delivered with retries, so an
// SMTP outage delays alerts but never loses them and never slows jobs.
// It also evaluates the alert rules once per RuleInterval for the whole
// cluster and delivers their notifications (email or webhook) through the
// same outbox.
type Alerter struct {
	cfg      AlerterConfig
	store    AlerterStore
	notifier *Notifier
	settings *domain.SettingsHolder
	logger   *slog.Logger
	kick     chan struct{}
}

// NewAlerter returns an alerter.
func NewAlerter(cfg AlerterConfig, store AlerterStore, notifier *Notifier, settings *domain.SettingsHolder, logger *slog.Logger) *Alerter {
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	cfg.PublicURL = strings.TrimRight(cmp.Or(cfg.PublicURL, "http://localhost:8080"), "/")
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, 10)
	cfg.SendTimeout = cmp.Or(cfg.SendTimeout, 30*time.Second)
	cfg.RuleInterval = cmp.Or(cfg.RuleInterval, 30*time.Second)
	return &Alerter{cfg: cfg, store: store, notifier: notifier, settings: settings,
		logger: logger.With("component", "alerter"), kick: make(chan struct{}, 1)}
}

// Kick asks for a check now (a job just entered the DLQ).
func (a *Alerter) Kick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Run checks and delivers until ctx is done.
func (a *Alerter) Run(ctx context.Context) error {
	return runLoopKicked(ctx, a.logger, a.cfg.Interval, a.kick, func(ctx context.Context) (int, bool, error) {
		return a.runOnce(ctx)
	})
}

func (a *Alerter) runOnce(ctx context.Context) (int, bool, error) {
	st := a.settings.Get()
	if len(st.AlertEmails) > 0 {
		queued, err := a.store.ClaimDLQAlert(ctx, st.DLQThreshold, time.Duration(st.AlertCooldownSeconds)*time.Second,
			func(snap domain.DLQSnapshot) (domain.Email, error) { return a.build(st.AlertEmails, snap) })
		if err != nil {
			return 0, false, err
		}
		if queued {
			a.logger.InfoContext(ctx, "DLQ alert queued", "recipients", len(st.AlertEmails))
		}
	}
	evaluated, queued, err := a.store.EvaluateAlertRules(ctx, a.cfg.RuleInterval, a.notifier.Render)
	if err != nil {
		return 0, false, err
	}
	if evaluated && queued > 0 {
		a.logger.InfoContext(ctx, "alert notifications queued", "count", queued)
	}
	sent, err := a.store.SendDueAlerts(ctx, a.cfg.MaxAttempts, func(ctx context.Context, m domain.Notification) error {
		sctx, cancel := context.WithTimeout(ctx, a.cfg.SendTimeout)
		defer cancel()
		err := a.notifier.Send(sctx, m)
		if err != nil {
			a.logger.WarnContext(ctx, "sending an alert failed; it will be retried", "channel", m.Channel, "error", err)
		}
		return err
	})
	if sent > 0 {
		a.logger.InfoContext(ctx, "alerts sent", "count", sent)
	}
	return sent, false, err
}

// alertView is what the templates show. Errors are scrubbed of secrets and
// cut short; html/template escapes everything from jobs.
type alertView struct {
	Count     int64
	Threshold int
	Jobs      []alertJob
	Link      string
}

type alertJob struct {
	ID, Type, Error, FailedAt string
	Attempts                  int
}

func (a *Alerter) build(to []string, snap domain.DLQSnapshot) (domain.Email, error) {
	v := alertView{Count: snap.Count, Threshold: snap.Threshold, Link: a.cfg.PublicURL + "/dlq"}
	for _, j := range snap.Recent {
		v.Jobs = append(v.Jobs, alertJob{ID: j.ID.String(), Type: j.Type, Attempts: j.Attempts,
			Error: domain.Truncate(domain.FirstLine(logs.Scrub(j.Error)), 200), FailedAt: j.FailedAt.UTC().Format("2006-01-02 15:04:05 UTC")})
	}
	var text, html bytes.Buffer
	if err := alertText.Execute(&text, v); err != nil {
		return domain.Email{}, err
	}
	if err := alertHTML.Execute(&html, v); err != nil {
		return domain.Email{}, err
	}
	count := fmt.Sprintf("%d", snap.Count)
	if snap.Count >= 100_000 {
		count = "100,000+"
	}
	return domain.Email{
		To:      to,
		Subject: fmt.Sprintf("Flint: %s jobs in the dead-letter queue (threshold %d)", count, snap.Threshold),
		Text:    text.String(),
		HTML:    html.String(),
	}, nil
}

var alertText = texttemplate.Must(texttemplate.New("text").Parse(`The Flint dead-letter queue holds {{.Count}} jobs (alert threshold {{.Threshold}}).

Most recent:
{{range .Jobs}}
- {{.ID}}  {{.Type}}  attempts {{.Attempts}}  failed {{.FailedAt}}
  {{.Error}}
{{end}}
Review and replay them: {{.Link}}
`))

var alertHTML = htmltemplate.Must(htmltemplate.New("html").Parse(`<!DOCTYPE html>
<html><body style="font-family: system-ui, sans-serif; color: #1d2330;">
<h2 style="margin: 0 0 8px;">{{.Count}} jobs in the dead-letter queue</h2>
<p>The alert threshold is {{.Threshold}}. The most recent:</p>
<table cellpadding="6" cellspacing="0" style="border-collapse: collapse; font-size: 13px;">
<tr style="background: #f0f2f5; text-align: left;"><th>Job</th><th>Type</th><th>Error</th><th>Attempts</th><th>Failed</th></tr>
{{range .Jobs}}<tr style="border-top: 1px solid #d9dee7;"><td style="font-family: monospace;">{{.ID}}</td><td>{{.Type}}</td><td>{{.Error}}</td><td>{{.Attempts}}</td><td>{{.FailedAt}}</td></tr>
{{end}}</table>
<p><a href="{{.Link}}">Open the dead-letter queue</a></p>
</body></html>
`))
