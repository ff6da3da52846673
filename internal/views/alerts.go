package views

import (
	"net/url"
	"strconv"

	"github.com/flinthq/flint/internal/domain"
)

// AlertsPage is the Alerts page: what fires now, the rules, the history
// and how the notifications went out.
type AlertsPage struct {
	Firing     []domain.Alert       // alerts firing now
	Rules      []domain.AlertRule   // every rule
	History    []domain.Alert       // the latest alerts, firing or resolved
	Deliveries []domain.AlertRecord // how their notifications went out
	Now        string               // the page's render time, for "as of"
	// Reach is, per rule id, where its notifications go now (none: it
	// notifies nobody).
	Reach map[int64][]string
	// Sent is, per firing alert id, its latest notifications.
	Sent map[int64][]domain.AlertRecord
}

// RuleForm is the form that creates or edits an alert rule. Values hold
// what the form shows, in its units (minutes, percent).
type RuleForm struct {
	ID     int64             // 0 for a new rule
	Kind   domain.AlertKind  // decides the fields shown
	Values map[string]string // by field name
	Errors map[string]string // by field name
	// Series offers the recurring series for cron_overdue rules.
	Series []*domain.Schedule
	// Message is an error about the whole form.
	Message string
	// NoFallback says the alert_emails setting is empty: a rule without
	// emails or webhook reaches nobody.
	NoFallback bool
}

// RuleSaved is shown once a rule is saved; Secret is a webhook secret the
// save created or changed, shown this once.
type RuleSaved struct {
	Rule   domain.AlertRule
	Secret string
	New    bool // the rule was just created, not edited
	// Reaches is where its notifications go now; none: nobody.
	Reaches []string
}

// RuleTest is how a rule's test notification went, per channel.
type RuleTest struct {
	RuleID     int64
	RuleName   string
	Deliveries []domain.AlertDelivery // one per channel of the rule
	Message    string                 // why no test could be sent
}

func ruleHref(id int64) string { return "/alerts/rules/" + strconv.FormatInt(id, 10) }

func newRuleHref(kind domain.AlertKind) string {
	return "/alerts/rules/new?kind=" + url.QueryEscape(string(kind))
}

// deliveryTarget is where one outbox row went.
func deliveryTarget(r domain.AlertRecord) string {
	if r.Channel == domain.ChannelWebhook {
		if u, err := url.Parse(r.WebhookURL); err == nil {
			return u.Host
		}
		return r.WebhookURL
	}
	out := ""
	for i, e := range r.Recipients {
		if i > 0 {
			out += ", "
		}
		out += e
	}
	return out
}

// deliveryAlert names the alert an outbox row notified of.
func deliveryAlert(r domain.AlertRecord) string {
	switch {
	case r.RuleName == "" && r.AlertID == nil:
		return "dead-letter threshold"
	case r.RuleName == "":
		return "deleted rule"
	}
	return r.RuleName + " · " + r.AlertSubject
}

// deliveryState is an outbox row's state in a word, and its badge class.
func deliveryState(r domain.AlertRecord) (string, string) {
	switch {
	case r.SentAt != nil:
		return "sent", "st-completed"
	case r.FailedAt != nil:
		return "gave up", "st-dead_letter"
	case r.Attempts > 0:
		return "retrying", "st-scheduled"
	}
	return "pending", "st-queued"
}

// kindFields are the form fields each kind uses, beyond the common ones.
func kindFields(k domain.AlertKind) map[string]bool {
	switch k {
	case domain.AlertFailureRate:
		return map[string]bool{"type": true, "threshold_percent": true, "window_minutes": true, "min_runs": true}
	case domain.AlertQueueLatency:
		return map[string]bool{"queue": true, "threshold_minutes": true}
	case domain.AlertCronOverdue:
		return map[string]bool{"series": true, "grace_minutes": true}
	case domain.AlertNoWorker:
		return map[string]bool{"queue": true, "grace_minutes": true}
	case domain.AlertJobWaiting:
		return map[string]bool{"queue": true, "waited_minutes": true}
	}
	return nil
}

// ruleKnown reports whether rules holds the rule id.
func ruleKnown(rules []domain.AlertRule, id int64) bool {
	for _, r := range rules {
		if r.ID == id {
			return true
		}
	}
	return false
}
