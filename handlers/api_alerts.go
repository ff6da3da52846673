package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/jobs"
)

// AlertStore keeps alert rules and what they found; *db.Store implements it.
type AlertStore interface {
	ListAlertRules(ctx context.Context) ([]jobs.AlertRule, error)
	GetAlertRule(ctx context.Context, id int64) (jobs.AlertRule, error)
	CreateAlertRule(ctx context.Context, r jobs.AlertRule) (jobs.AlertRule, error)
	UpdateAlertRule(ctx context.Context, before, r jobs.AlertRule) (jobs.AlertRule, error)
	DeleteAlertRule(ctx context.Context, id int64) error
	ListAlerts(ctx context.Context, q jobs.AlertQuery) ([]jobs.Alert, error)
	AlertOutbox(ctx context.Context, limit int) ([]jobs.AlertRecord, error)
	AlertsMark(ctx context.Context) (string, error)
}

// AlertTester sends a rule's test notification to each of its channels now.
type AlertTester func(ctx context.Context, r jobs.AlertRule) []jobs.AlertDelivery

// alertRuleInput is the body of POST and PATCH /api/v1/alerts/rules: every
// field optional on PATCH; kind and name required on POST. A PATCH may
// repeat the rule's kind but not change it.
type alertRuleInput struct {
	Name            *string         `json:"name"`
	Kind            *string         `json:"kind"`
	Type            *string         `json:"type"`
	Queue           *string         `json:"queue"`
	Series          json.RawMessage `json:"series"`
	Threshold       *float64        `json:"threshold"`
	WindowSeconds   *int            `json:"window_seconds"`
	MinRuns         *int            `json:"min_runs"`
	GraceSeconds    *int            `json:"grace_seconds"`
	CooldownSeconds *int            `json:"cooldown_seconds"`
	Emails          *[]string       `json:"emails"`
	WebhookURL      *string         `json:"webhook_url"`
	WebhookSecret   *string         `json:"webhook_secret"`
	Enabled         *bool           `json:"enabled"`
}

// apply sets the given fields on r, after checking each number given
// against its range whatever r's kind: a value the kind does not use is
// still stored, and must fit the rule's row.
func (in *alertRuleInput) apply(r *jobs.AlertRule) error {
	for _, f := range []struct {
		name string
		v    *int
	}{{"window_seconds", in.WindowSeconds}, {"min_runs", in.MinRuns}, {"grace_seconds", in.GraceSeconds},
		{"cooldown_seconds", in.CooldownSeconds}} {
		if f.v != nil {
			if err := jobs.CheckAlertField(f.name, *f.v); err != nil {
				return err
			}
		}
	}
	if in.Threshold != nil {
		if err := jobs.CheckAlertThreshold(r.Kind, *in.Threshold); err != nil {
			return err
		}
	}
	set := func(dst *string, v *string) {
		if v != nil {
			*dst = strings.TrimSpace(*v)
		}
	}
	set(&r.Name, in.Name)
	set(&r.Type, in.Type)
	set(&r.Queue, in.Queue)
	set(&r.WebhookURL, in.WebhookURL)
	if in.WebhookSecret != nil {
		r.WebhookSecret = *in.WebhookSecret
	}
	if in.Series != nil {
		var s *string
		if err := json.Unmarshal(in.Series, &s); err != nil {
			return invalid("series", "must be a recurring series id (UUID) or null")
		}
		r.Series = nil
		if s != nil && *s != "" {
			id, err := uuid.Parse(*s)
			if err != nil {
				return invalid("series", "must be a recurring series id (UUID) or null")
			}
			r.Series = &id
		}
	}
	for _, f := range []struct {
		dst *int
		v   *int
	}{{&r.WindowSeconds, in.WindowSeconds}, {&r.MinRuns, in.MinRuns}, {&r.GraceSeconds, in.GraceSeconds}, {&r.CooldownSeconds, in.CooldownSeconds}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if in.Threshold != nil {
		r.Threshold = *in.Threshold
	}
	if in.Emails != nil {
		r.Emails = append([]string{}, *in.Emails...)
	}
	if in.Enabled != nil {
		r.Enabled = *in.Enabled
	}
	return nil
}

// alertRuleResponse is a rule as the API shows it; webhook_secret appears
// only in the response that set it.
type alertRuleResponse struct {
	jobs.AlertRule
	Condition     string `json:"condition"`
	WebhookSigned bool   `json:"webhook_signed"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
}

func ruleResponse(r jobs.AlertRule, showSecret bool) alertRuleResponse {
	out := alertRuleResponse{AlertRule: r, Condition: r.Describe(), WebhookSigned: r.WebhookSecret != ""}
	if showSecret {
		out.WebhookSecret = r.WebhookSecret
	}
	return out
}

// newWebhookSecret makes a signing secret for a webhook that got none.
func newWebhookSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return "whsec_" + hex.EncodeToString(b)
}

// prepareRule fills in a webhook secret where one is needed, checks that a
// named series exists, and validates the rule. It reports whether the
// secret is new (so the response shows it once).
func (s *server) prepareRule(ctx context.Context, r *jobs.AlertRule, before *jobs.AlertRule) (bool, error) {
	fresh := false
	switch {
	case r.WebhookURL == "":
		r.WebhookSecret = ""
	case r.WebhookSecret == "":
		r.WebhookSecret, fresh = newWebhookSecret(), true
	case before == nil || before.WebhookSecret != r.WebhookSecret:
		fresh = true
	}
	if err := r.Validate(); err != nil {
		return false, err
	}
	if r.Series != nil && (before == nil || !sameSeriesID(before.Series, r.Series)) {
		if _, err := s.store.GetSchedule(ctx, *r.Series); err != nil {
			if errors.Is(err, jobs.ErrNotFound) {
				return false, invalid("series", "no recurring series has this id")
			}
			return false, err
		}
	}
	return fresh, nil
}

func sameSeriesID(a, b *uuid.UUID) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// ruleAudit is what the audit trail keeps of a rule: everything but the
// webhook secret.
func ruleAudit(r jobs.AlertRule) map[string]any {
	return map[string]any{"id": r.ID, "name": r.Name, "kind": r.Kind, "condition": r.Describe(), "emails": r.Emails,
		"webhook_url": r.WebhookURL, "enabled": r.Enabled, "cooldown_seconds": r.CooldownSeconds}
}

// ruleID reads the :id parameter.
func ruleID(c *fiber.Ctx) (int64, error) {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil || id < 1 {
		return 0, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such alert rule; rule ids are whole numbers"}
	}
	return id, nil
}

// ruleNotFound turns the store's not-found into the API's.
func ruleNotFound(err error) error {
	if errors.Is(err, jobs.ErrNotFound) {
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such alert rule"}
	}
	return err
}

// ruleFromPath reads the rule the :id parameter names.
func (s *server) ruleFromPath(c *fiber.Ctx) (jobs.AlertRule, error) {
	id, err := ruleID(c)
	if err != nil {
		return jobs.AlertRule{}, err
	}
	r, err := s.alerts.GetAlertRule(c.UserContext(), id)
	if err != nil {
		return jobs.AlertRule{}, ruleNotFound(err)
	}
	return r, nil
}

// listAlertRules handles GET /api/v1/alerts/rules.
func (s *server) listAlertRules(c *fiber.Ctx) error {
	rules, err := s.alerts.ListAlertRules(c.UserContext())
	if err != nil {
		return err
	}
	out := make([]alertRuleResponse, len(rules))
	for i, r := range rules {
		out[i] = ruleResponse(r, false)
	}
	return c.JSON(fiber.Map{"rules": out})
}

// getAlertRule handles GET /api/v1/alerts/rules/{id}.
func (s *server) getAlertRule(c *fiber.Ctx) error {
	r, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	return c.JSON(ruleResponse(r, false))
}

// createAlertRule handles POST /api/v1/alerts/rules.
func (s *server) createAlertRule(c *fiber.Ctx) error {
	var in alertRuleInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.Kind == nil {
		return invalid("kind", "is required: one of failure_rate, queue_latency, cron_overdue, no_worker")
	}
	r := jobs.NewAlertRule(jobs.AlertKind(*in.Kind))
	if err := in.apply(&r); err != nil {
		return err
	}
	fresh, err := s.prepareRule(c.UserContext(), &r, nil)
	if err != nil {
		return err
	}
	r, err = s.alerts.CreateAlertRule(c.UserContext(), r)
	if err != nil {
		return err
	}
	s.audit(c, "alert_rule_create", ruleAudit(r))
	return c.Status(http.StatusCreated).JSON(ruleResponse(r, fresh))
}

// patchAlertRule handles PATCH /api/v1/alerts/rules/{id}.
func (s *server) patchAlertRule(c *fiber.Ctx) error {
	before, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	var in alertRuleInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.Kind != nil && jobs.AlertKind(*in.Kind) != before.Kind {
		return invalid("kind", "cannot be changed; create a new rule")
	}
	r := before
	if err := in.apply(&r); err != nil {
		return err
	}
	fresh, err := s.prepareRule(c.UserContext(), &r, &before)
	if err != nil {
		return err
	}
	r, err = s.alerts.UpdateAlertRule(c.UserContext(), before, r)
	if err != nil {
		return ruleNotFound(err)
	}
	s.audit(c, "alert_rule_update", map[string]any{"before": ruleAudit(before), "after": ruleAudit(r)})
	return c.JSON(ruleResponse(r, fresh))
}

// deleteAlertRule handles DELETE /api/v1/alerts/rules/{id}.
func (s *server) deleteAlertRule(c *fiber.Ctx) error {
	r, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	if err := s.alerts.DeleteAlertRule(c.UserContext(), r.ID); err != nil {
		return ruleNotFound(err)
	}
	s.audit(c, "alert_rule_delete", ruleAudit(r))
	return c.SendStatus(http.StatusNoContent)
}

// errNowhereToSend refuses a test of a rule with no channel.
var errNowhereToSend = invalid("emails", "the rule has nowhere to send: give it emails or a webhook_url, or set the alert_emails setting")

// testAlertRule handles POST /api/v1/alerts/rules/{id}/test: a test
// notification to each of the rule's channels now, and how each went.
func (s *server) testAlertRule(c *fiber.Ctx) error {
	r, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	res := s.alertTest(c.UserContext(), r)
	if len(res) == 0 {
		return errNowhereToSend
	}
	return c.JSON(fiber.Map{"deliveries": res})
}

// alertQuery reads status, rule_id, before and limit.
func alertQuery(c *fiber.Ctx) (jobs.AlertQuery, error) {
	q := jobs.AlertQuery{Status: c.Query("status"), Limit: 100}
	if q.Status != "" && q.Status != "firing" && q.Status != "resolved" {
		return q, invalid("status", "must be firing or resolved (or omitted for both)")
	}
	for _, p := range []struct {
		name string
		dst  *int64
		msg  string
	}{{"rule_id", &q.RuleID, "must be an alert rule id"}, {"before", &q.Before, "must be an alert id from a previous page"}} {
		if v := c.Query(p.name); v != "" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 1 {
				return q, invalid(p.name, p.msg)
			}
			*p.dst = n
		}
	}
	var err error
	q.Limit, err = limitQuery(c, q.Limit)
	return q, err
}

// listAlerts handles GET /api/v1/alerts: alert history, newest first.
func (s *server) listAlerts(c *fiber.Ctx) error {
	q, err := alertQuery(c)
	if err != nil {
		return err
	}
	alerts, err := s.alerts.ListAlerts(c.UserContext(), q)
	if err != nil {
		return err
	}
	var next *int64
	if len(alerts) == q.Limit {
		n := alerts[len(alerts)-1].ID
		next = &n
	}
	if alerts == nil {
		alerts = []jobs.Alert{}
	}
	return c.JSON(fiber.Map{"alerts": alerts, "next_before": next})
}

// alertDelivery is an outbox row as the API shows it.
type alertDelivery struct {
	ID         int64    `json:"id"`
	CreatedAt  string   `json:"created_at"`
	Channel    string   `json:"channel"`
	AlertID    *int64   `json:"alert_id"`
	Recipients []string `json:"recipients"`
	WebhookURL string   `json:"webhook_url,omitempty"`
	Subject    string   `json:"subject"`
	Status     string   `json:"status"`
	Attempts   int      `json:"attempts"`
	LastError  string   `json:"last_error,omitempty"`
}

// DeliveryStatus says where an outbox row is: sent, failed (given up) or
// pending (waiting for its first try or a retry).
func deliveryStatus(r jobs.AlertRecord) string {
	switch {
	case r.SentAt != nil:
		return "sent"
	case r.FailedAt != nil:
		return "failed"
	}
	return "pending"
}

// listAlertDeliveries handles GET /api/v1/alerts/deliveries: the latest
// notifications and how their delivery went.
func (s *server) listAlertDeliveries(c *fiber.Ctx) error {
	limit, err := limitQuery(c, 50)
	if err != nil {
		return err
	}
	recs, err := s.alerts.AlertOutbox(c.UserContext(), limit)
	if err != nil {
		return err
	}
	out := make([]alertDelivery, len(recs))
	for i, r := range recs {
		to := r.Recipients
		if to == nil {
			to = []string{}
		}
		out[i] = alertDelivery{ID: r.ID, CreatedAt: r.CreatedAt.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Channel: r.Channel,
			AlertID: r.AlertID, Recipients: to, WebhookURL: r.WebhookURL, Subject: r.Subject, Status: deliveryStatus(r),
			Attempts: r.Attempts, LastError: r.LastError}
	}
	return c.JSON(fiber.Map{"deliveries": out})
}
