package domain

import (
	"fmt"
	"math"
	"net/url"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
	"github.com/google/uuid"
)

// AlertKind is the condition an alert rule watches.
type AlertKind string

// The alert rule kinds.
const (
	// AlertFailureRate: the share of a type's finished runs that failed
	// over a window is above a threshold (0 to 1), once the window holds at
	// least MinRuns runs.
	AlertFailureRate AlertKind = "failure_rate"
	// AlertQueueLatency: the oldest job waiting in a queue has waited
	// longer than a threshold in seconds.
	AlertQueueLatency AlertKind = "queue_latency"
	// AlertCronOverdue: a recurring series' next occurrence is overdue by
	// more than a grace period (the scheduler did not release it).
	AlertCronOverdue AlertKind = "cron_overdue"
	// AlertNoWorker: jobs have waited in a queue longer than a grace
	// period and no live worker serves that queue.
	AlertNoWorker AlertKind = "no_worker"
	// AlertJobWaiting: a job of a queue has slept, or waited for a signal
	// or an event, longer than a threshold in seconds (a durable wait
	// that nothing ends, or a wake-up that never came).
	AlertJobWaiting AlertKind = "job_waiting"
)

// AlertKinds lists the kinds in the order the dashboard offers them.
var AlertKinds = []AlertKind{AlertFailureRate, AlertQueueLatency, AlertCronOverdue, AlertNoWorker, AlertJobWaiting}

// Title is the kind in words.
func (k AlertKind) Title() string {
	switch k {
	case AlertFailureRate:
		return "Failure rate of a type"
	case AlertQueueLatency:
		return "Oldest waiting job in a queue"
	case AlertCronOverdue:
		return "Recurring series overdue"
	case AlertNoWorker:
		return "Waiting jobs with no live worker"
	case AlertJobWaiting:
		return "Jobs sleeping or waiting too long"
	}
	return string(k)
}

// AlertRule is a condition evaluated once per interval for the whole
// cluster, and where to send what it finds.
type AlertRule struct {
	ID   int64     `json:"id"`
	Name string    `json:"name"`
	Kind AlertKind `json:"kind"`
	// Type limits a failure_rate rule to one job type; empty watches each
	// type separately.
	Type string `json:"type"`
	// Queue limits a queue_latency, no_worker or job_waiting rule to one
	// queue; empty
	// watches each queue separately.
	Queue string `json:"queue"`
	// Series limits a cron_overdue rule to one recurring series; nil
	// watches every series.
	Series *uuid.UUID `json:"series"`
	// Threshold is the failure rate (0 to 1) of failure_rate, or the age
	// in seconds of queue_latency and job_waiting, above which the rule
	// fires.
	Threshold float64 `json:"threshold"`
	// WindowSeconds is failure_rate's window; counts are kept per minute,
	// so it is rounded up to whole minutes.
	WindowSeconds int `json:"window_seconds"`
	// MinRuns is how many finished runs failure_rate needs in its window
	// before a rate means anything.
	MinRuns int `json:"min_runs"`
	// GraceSeconds is how late cron_overdue and no_worker let things be.
	GraceSeconds int `json:"grace_seconds"`
	// CooldownSeconds is the least time between two notifications of an
	// alert that keeps firing.
	CooldownSeconds int `json:"cooldown_seconds"`
	// Emails receive the rule's notifications; empty with no webhook means
	// the alert_emails setting.
	Emails []string `json:"emails"`
	// WebhookURL receives a JSON POST (Slack-compatible) signed with
	// WebhookSecret; empty means no webhook.
	WebhookURL string `json:"webhook_url"`
	// WebhookSecret signs webhook bodies. It is never returned by reads;
	// the response that creates or changes it shows it once.
	WebhookSecret string    `json:"-"`
	Enabled       bool      `json:"enabled"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
}

// Alert rule limits.
const (
	maxAlertWindow   = 24 * 3600
	maxAlertGrace    = 7 * 24 * 3600
	maxAlertCooldown = 7 * 24 * 3600
	maxAlertLatency  = 30 * 24 * 3600
	maxAlertEmails   = 50
	maxRuleName      = 200
)

// alertRanges are the ranges of a rule's whole-number fields. Each kind
// uses some of them, but a rule keeps them all, so a value given for any
// of them must fit its range whatever the kind (CheckAlertField).
var alertRanges = map[string]struct{ min, max int }{
	"window_seconds":   {60, maxAlertWindow},
	"min_runs":         {1, 1_000_000},
	"grace_seconds":    {0, maxAlertGrace},
	"cooldown_seconds": {60, maxAlertCooldown},
}

// CheckAlertField checks the value given for one of a rule's whole-number
// fields (window_seconds, min_runs, grace_seconds, cooldown_seconds)
// against its range, whatever the rule's kind; other fields pass.
func CheckAlertField(field string, v int) error {
	r, ok := alertRanges[field]
	if !ok || (v >= r.min && v <= r.max) {
		return nil
	}
	return jobs.Invalid(field, "must be a whole number between %d and %d", r.min, r.max)
}

// CheckAlertThreshold checks the threshold given for a rule of kind: a
// failure rate, an age in seconds, or nothing for the kinds that have none.
func CheckAlertThreshold(kind AlertKind, v float64) error {
	switch kind {
	case AlertFailureRate:
		if !(v > 0 && v < 1) {
			return jobs.Invalid("threshold", "is a failure rate: more than 0 and less than 1 (0.2 means 20%%)")
		}
	case AlertQueueLatency:
		if !(v >= 1 && v <= maxAlertLatency) || v != math.Trunc(v) {
			return jobs.Invalid("threshold", "is the age in seconds of the oldest waiting job: a whole number between 1 and %d", maxAlertLatency)
		}
	case AlertJobWaiting:
		if !(v >= 1 && v <= maxAlertLatency) || v != math.Trunc(v) {
			return jobs.Invalid("threshold", "is how long in seconds a job may sleep or wait for a signal or event: a whole number between 1 and %d", maxAlertLatency)
		}
	case AlertCronOverdue, AlertNoWorker:
		if v != 0 {
			return jobs.Invalid("threshold", "is not used by %s rules (grace_seconds is their limit): leave it out or 0", kind)
		}
	}
	return nil
}

// NewAlertRule is a rule with the defaults a new one starts from.
func NewAlertRule(kind AlertKind) AlertRule {
	r := AlertRule{Kind: kind, WindowSeconds: 300, MinRuns: 10, GraceSeconds: 300, CooldownSeconds: 3600, Enabled: true}
	switch kind {
	case AlertFailureRate:
		r.Threshold = 0.2
	case AlertQueueLatency:
		r.Threshold = 300
	case AlertJobWaiting:
		r.Threshold = 86400
	}
	return r
}

// Validate checks the rule, naming the first bad field.
func (r *AlertRule) Validate() error {
	r.Name = strings.TrimSpace(r.Name)
	if r.Name == "" {
		return jobs.Invalid("name", "is required: say what the rule watches, like \"emails failing\"")
	}
	if len(r.Name) > maxRuleName || !jobs.CleanText(r.Name) {
		return jobs.Invalid("name", "must be at most %d characters of plain text", maxRuleName)
	}
	// The fields the kind uses; CheckAlertField checks the others where
	// they are given.
	var used []string
	switch r.Kind {
	case AlertFailureRate:
		if err := CheckAlertThreshold(r.Kind, r.Threshold); err != nil {
			return err
		}
		used = []string{"window_seconds", "min_runs"}
	case AlertQueueLatency, AlertJobWaiting:
		if err := CheckAlertThreshold(r.Kind, r.Threshold); err != nil {
			return err
		}
	case AlertCronOverdue, AlertNoWorker:
		used = []string{"grace_seconds"}
	default:
		return jobs.Invalid("kind", "must be one of failure_rate, queue_latency, cron_overdue, no_worker, job_waiting")
	}
	values := map[string]int{"window_seconds": r.WindowSeconds, "min_runs": r.MinRuns, "grace_seconds": r.GraceSeconds,
		"cooldown_seconds": r.CooldownSeconds}
	for _, f := range used {
		if err := CheckAlertField(f, values[f]); err != nil {
			return err
		}
	}
	if r.Type != "" && (r.Kind != AlertFailureRate) {
		return jobs.Invalid("type", "applies to failure_rate rules only")
	}
	if r.Queue != "" && r.Kind != AlertQueueLatency && r.Kind != AlertNoWorker && r.Kind != AlertJobWaiting {
		return jobs.Invalid("queue", "applies to queue_latency, no_worker and job_waiting rules only")
	}
	if r.Series != nil && r.Kind != AlertCronOverdue {
		return jobs.Invalid("series", "applies to cron_overdue rules only")
	}
	if len(r.Type) > 200 || !jobs.CleanText(r.Type) {
		return jobs.Invalid("type", "must be at most 200 characters of plain text")
	}
	if len(r.Queue) > 200 || !jobs.CleanText(r.Queue) {
		return jobs.Invalid("queue", "must be at most 200 characters of plain text")
	}
	if err := CheckAlertField("cooldown_seconds", r.CooldownSeconds); err != nil {
		return err
	}
	if r.Emails == nil {
		r.Emails = []string{}
	}
	if err := validateEmails("emails", r.Emails); err != nil {
		return err
	}
	if r.WebhookURL != "" {
		if err := ValidateWebhookURL(r.WebhookURL); err != nil {
			return jobs.Invalid("webhook_url", "%s", err.Error())
		}
		if err := CheckWebhookSecret("webhook_secret", r.WebhookSecret); err != nil {
			return err
		}
	}
	return nil
}

// ValidateWebhookURL checks a webhook address before it is stored: an
// absolute http or https URL without user info. Where it may connect is
// decided at delivery by the same SSRF guard as the http_request job.
func ValidateWebhookURL(raw string) error {
	if len(raw) > 2000 || !jobs.CleanText(raw) {
		return fmt.Errorf("must be a URL of at most 2000 characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("is not a URL: %v", err)
	}
	if err := checkURLSyntax(u); err != nil {
		return err
	}
	return nil
}

// validateEmails checks a list of plain email addresses.
func validateEmails(field string, list []string) error {
	if len(list) > maxAlertEmails {
		return jobs.Invalid(field, "may hold at most %d addresses", maxAlertEmails)
	}
	for i, e := range list {
		if !PlainEmail(e) {
			return jobs.Invalid(fmt.Sprintf("%s[%d]", field, i), "%q is not a plain email address", e)
		}
	}
	return nil
}

// Describe is the rule's condition in words, for lists and notifications.
func (r *AlertRule) Describe() string {
	switch r.Kind {
	case AlertFailureRate:
		what := "any type"
		if r.Type != "" {
			what = r.Type
		}
		return fmt.Sprintf("more than %s of %s runs fail within %s (at least %d runs)",
			Percent(r.Threshold), what, Seconds(r.WindowSeconds), r.MinRuns)
	case AlertQueueLatency:
		what := "any queue"
		if r.Queue != "" {
			what = "queue " + r.Queue
		}
		return fmt.Sprintf("a job in %s has waited more than %s", what, Seconds(int(r.Threshold)))
	case AlertCronOverdue:
		what := "any recurring series"
		if r.Series != nil {
			what = "series " + r.Series.String()
		}
		return fmt.Sprintf("%s is more than %s overdue", what, Seconds(r.GraceSeconds))
	case AlertNoWorker:
		what := "any queue"
		if r.Queue != "" {
			what = "queue " + r.Queue
		}
		return fmt.Sprintf("jobs in %s wait more than %s with no live worker serving it", what, Seconds(r.GraceSeconds))
	case AlertJobWaiting:
		what := "any queue"
		if r.Queue != "" {
			what = "queue " + r.Queue
		}
		return fmt.Sprintf("a job in %s has slept or waited for a signal or event more than %s", what, Seconds(int(r.Threshold)))
	}
	return string(r.Kind)
}

// Percent shows a rate as a percentage.
func Percent(rate float64) string {
	s := fmt.Sprintf("%.1f", rate*100)
	return strings.TrimSuffix(s, ".0") + "%"
}

// Seconds shows a duration given in seconds the way people say it.
func Seconds(n int) string {
	switch {
	case n%86400 == 0 && n >= 86400:
		return unitCount(n/86400, "day")
	case n%3600 == 0 && n >= 3600:
		return unitCount(n/3600, "hour")
	case n%60 == 0 && n >= 60:
		return unitCount(n/60, "minute")
	}
	return unitCount(n, "second")
}

func unitCount(n int, unit string) string {
	return fmt.Sprintf("%d %s", n, plural(n, unit, unit+"s"))
}

// windowMinutes is the failure window in whole minutes (counts are kept
// per minute), rounded up.
func (r *AlertRule) windowMinutes() int { return (r.WindowSeconds + 59) / 60 }

// WindowMinutes is the failure window in whole minutes.
func (r *AlertRule) WindowMinutes() int { return r.windowMinutes() }

// Reach says where the rule's notifications go, given the alert_emails
// setting a rule without channels of its own falls back to: one entry per
// channel ("email a@example.com, b@example.com", "webhook hooks.slack.com").
// None means the rule notifies nobody when it fires.
func (r *AlertRule) Reach(alertEmails []string) []string {
	var out []string
	emails := r.Emails
	if len(emails) == 0 && r.WebhookURL == "" {
		emails = alertEmails
	}
	if len(emails) > 0 {
		out = append(out, "email "+strings.Join(emails, ", "))
	}
	if r.WebhookURL != "" {
		out = append(out, "webhook "+RedactURL(r.WebhookURL))
	}
	return out
}

// NobodyWarning says why a rule that reaches nobody notifies no one, and
// what to do about it.
const NobodyWarning = "this rule reaches nobody: it has no emails or webhook of its own and the alert_emails setting is empty, so its alerts will fire and notify no one; add an email or a webhook, or set alert_emails"
