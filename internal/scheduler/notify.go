package scheduler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	htmltemplate "html/template"
	"strings"
	texttemplate "text/template"
	"time"

	"github.com/flinthq/flint/internal/domain"
)

// NotifierConfig configures a Notifier.
type NotifierConfig struct {
	// PublicURL is the dashboard's address for links; zero means
	// http://localhost:8080.
	PublicURL string
	// TestTimeout bounds a test delivery to one channel; zero means 15 s.
	TestTimeout time.Duration
}

// Sender delivers one notification (workers.AlertSender: email through the
// mailer, webhooks over HTTP).
type Sender interface {
	// Send delivers m once; an error leaves it in the outbox to retry.
	Send(ctx context.Context, m domain.Notification) error
}

// Notifier renders alert notifications for a rule's channels and hands
// them to its sender.
type Notifier struct {
	cfg      NotifierConfig
	sender   Sender
	settings *domain.SettingsHolder
}

// NewNotifier returns a notifier; settings (may be nil) supply the
// alert_emails a rule without channels of its own sends to.
func NewNotifier(cfg NotifierConfig, sender Sender, settings *domain.SettingsHolder) *Notifier {
	cfg.PublicURL = strings.TrimRight(cmp.Or(cfg.PublicURL, "http://localhost:8080"), "/")
	cfg.TestTimeout = cmp.Or(cfg.TestTimeout, 15*time.Second)
	return &Notifier{cfg: cfg, sender: sender, settings: settings}
}

// recipients are the addresses a rule's email goes to: its own, or the
// alert_emails setting when it names none and has no webhook either.
func (n *Notifier) recipients(r domain.AlertRule) []string {
	if len(r.Emails) > 0 {
		return r.Emails
	}
	if r.WebhookURL == "" && n.settings != nil {
		return n.settings.Get().AlertEmails
	}
	return nil
}

// Render returns the notice's messages, one per channel of its rule (none
// when the rule has nowhere to send).
func (n *Notifier) Render(notice domain.AlertNotice) ([]domain.Notification, error) {
	v := n.view(notice)
	var out []domain.Notification
	if to := n.recipients(notice.Rule); len(to) > 0 {
		var text, html bytes.Buffer
		if err := noticeText.Execute(&text, v); err != nil {
			return nil, err
		}
		if err := noticeHTML.Execute(&html, v); err != nil {
			return nil, err
		}
		out = append(out, domain.Notification{Channel: domain.ChannelEmail,
			Email: domain.Email{To: to, Subject: v.Headline, Text: text.String(), HTML: html.String()}})
	}
	if notice.Rule.WebhookURL != "" {
		body, err := json.Marshal(webhookBody(v))
		if err != nil {
			return nil, err
		}
		out = append(out, domain.Notification{Channel: domain.ChannelWebhook, WebhookURL: notice.Rule.WebhookURL,
			WebhookSecret: notice.Rule.WebhookSecret, Email: domain.Email{Subject: v.Headline, Text: string(body)}})
	}
	return out, nil
}

// Send delivers one notification through the sender.
func (n *Notifier) Send(ctx context.Context, m domain.Notification) error {
	return n.sender.Send(ctx, m)
}

// SendTest sends a test notification for the rule to each of its channels
// now, bypassing the outbox, and reports how each went.
func (n *Notifier) SendTest(ctx context.Context, r domain.AlertRule) []domain.AlertDelivery {
	now := time.Now()
	msgs, err := n.Render(domain.AlertNotice{Event: domain.AlertTest, Rule: r, Alert: domain.Alert{
		RuleID: r.ID, RuleName: r.Name, Kind: r.Kind, Subject: "test", FiredAt: now, LastNotifiedAt: now, Notifications: 1,
		Message: "a test of this rule's channels; when it fires it will say: " + r.Describe()}})
	if err != nil {
		return []domain.AlertDelivery{{Channel: "all", Error: err.Error()}}
	}
	out := make([]domain.AlertDelivery, 0, len(msgs))
	for _, m := range msgs {
		d := domain.AlertDelivery{Channel: m.Channel, Target: strings.Join(m.Email.To, ", ")}
		if m.Channel == domain.ChannelWebhook {
			d.Target = m.WebhookURL
		}
		sctx, cancel := context.WithTimeout(ctx, n.cfg.TestTimeout)
		if err := n.Send(sctx, m); err != nil {
			d.Error = err.Error()
		} else {
			d.OK = true
		}
		cancel()
		out = append(out, d)
	}
	return out
}

// noticeView is what the templates show.
type noticeView struct {
	Event    domain.AlertEvent
	Headline string
	Rule     domain.AlertRule
	Alert    domain.Alert
	Cond     string
	FiredAt  string
	Resolved string
	Link     string
}

func (n *Notifier) view(notice domain.AlertNotice) noticeView {
	a, r := notice.Alert, notice.Rule
	v := noticeView{Event: notice.Event, Rule: r, Alert: a, Cond: r.Describe(),
		FiredAt: a.FiredAt.UTC().Format("2006-01-02 15:04:05 UTC"), Link: n.cfg.PublicURL + "/alerts"}
	if a.ResolvedAt != nil {
		v.Resolved = a.ResolvedAt.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	what := r.Name
	if a.Subject != "" && a.Subject != "test" {
		what += " (" + a.Subject + ")"
	}
	switch notice.Event {
	case domain.AlertFiring:
		v.Headline = "Flint alert firing: " + what
	case domain.AlertRepeat:
		v.Headline = "Flint alert still firing: " + what
	case domain.AlertResolved:
		v.Headline = "Flint alert resolved: " + what
	default:
		v.Headline = "Flint test alert: " + what
	}
	return v
}

// slackEscape escapes what Slack's message text treats as markup.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// webhookPayload is the webhook body: "text" is what a Slack (or
// Mattermost, or Rocket.Chat) incoming webhook shows; "flint" carries the
// same facts for programs.
type webhookPayload struct {
	Text  string        `json:"text"`
	Flint webhookDetail `json:"flint"`
}

type webhookDetail struct {
	Event      domain.AlertEvent `json:"event"`
	AlertID    int64             `json:"alert_id,omitempty"`
	RuleID     int64             `json:"rule_id"`
	RuleName   string            `json:"rule_name"`
	Kind       domain.AlertKind  `json:"kind"`
	Condition  string            `json:"condition"`
	Subject    string            `json:"subject"`
	Value      float64           `json:"value"`
	Message    string            `json:"message"`
	FiredAt    time.Time         `json:"fired_at"`
	ResolvedAt *time.Time        `json:"resolved_at"`
	URL        string            `json:"url"`
}

func webhookBody(v noticeView) webhookPayload {
	icon := map[domain.AlertEvent]string{domain.AlertFiring: ":red_circle:", domain.AlertRepeat: ":red_circle:",
		domain.AlertResolved: ":large_green_circle:", domain.AlertTest: ":white_circle:"}[v.Event]
	text := fmt.Sprintf("%s *%s*\n%s\n<%s|Open the Alerts page>", icon, slackEscape.Replace(v.Headline),
		slackEscape.Replace(v.Alert.Message), v.Link)
	return webhookPayload{Text: text, Flint: webhookDetail{Event: v.Event, AlertID: v.Alert.ID, RuleID: v.Rule.ID,
		RuleName: v.Rule.Name, Kind: v.Rule.Kind, Condition: v.Cond, Subject: v.Alert.Subject, Value: v.Alert.Value,
		Message: v.Alert.Message, FiredAt: v.Alert.FiredAt.UTC(), ResolvedAt: v.Alert.ResolvedAt, URL: v.Link}}
}

var noticeText = texttemplate.Must(texttemplate.New("text").Parse(`{{.Headline}}

{{.Alert.Message}}

Rule:      {{.Rule.Name}}: {{.Cond}}
Fired:     {{.FiredAt}}{{if .Resolved}}
Resolved:  {{.Resolved}}{{end}}

Alerts: {{.Link}}
`))

var noticeHTML = htmltemplate.Must(htmltemplate.New("html").Parse(`<!DOCTYPE html>
<html><body style="font-family: system-ui, sans-serif; color: #1d2330;">
<h2 style="margin: 0 0 8px;">{{.Headline}}</h2>
<p>{{.Alert.Message}}</p>
<table cellpadding="4" cellspacing="0" style="font-size: 13px;">
<tr><th align="left">Rule</th><td>{{.Rule.Name}}: {{.Cond}}</td></tr>
<tr><th align="left">Fired</th><td>{{.FiredAt}}</td></tr>
{{if .Resolved}}<tr><th align="left">Resolved</th><td>{{.Resolved}}</td></tr>{{end}}
</table>
<p><a href="{{.Link}}">Open the Alerts page</a></p>
</body></html>
`))
