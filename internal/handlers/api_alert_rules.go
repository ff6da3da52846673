package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
)

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
func (in *alertRuleInput) apply(r *domain.AlertRule) error {
	for _, f := range []struct {
		name string
		v    *int
	}{{"window_seconds", in.WindowSeconds}, {"min_runs", in.MinRuns}, {"grace_seconds", in.GraceSeconds},
		{"cooldown_seconds", in.CooldownSeconds}} {
		if f.v != nil {
			if err := domain.CheckAlertField(f.name, *f.v); err != nil {
				return err
			}
		}
	}
	if in.Threshold != nil {
		if err := domain.CheckAlertThreshold(r.Kind, *in.Threshold); err != nil {
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
	domain.AlertRule
	Condition     string `json:"condition"`
	WebhookSigned bool   `json:"webhook_signed"`
	WebhookSecret string `json:"webhook_secret,omitempty"`
	// Reaches says where its notifications go now (the alert_emails
	// setting included); empty, Warning says the rule notifies nobody.
	Reaches []string `json:"reaches"`
	Warning string   `json:"warning,omitempty"`
}

func (s *server) ruleResponse(r domain.AlertRule, showSecret bool) alertRuleResponse {
	out := alertRuleResponse{AlertRule: r, Condition: r.Describe(), WebhookSigned: r.WebhookSecret != "",
		Reaches: r.Reach(s.alertEmails())}
	if showSecret {
		out.WebhookSecret = r.WebhookSecret
	}
	if len(out.Reaches) == 0 {
		out.Reaches, out.Warning = []string{}, domain.NobodyWarning
	}
	return out
}

// alertEmails is the alert_emails setting: where a rule without channels
// of its own sends.
func (s *server) alertEmails() []string {
	if s.settings == nil {
		return nil
	}
	return s.settings.Get().AlertEmails
}

// prepareRule fills in a webhook secret where one is needed, checks that a
// named series exists, and validates the rule. It reports whether the
// secret is new (so the response shows it once).
func (s *server) prepareRule(ctx context.Context, r *domain.AlertRule, before *domain.AlertRule) (bool, error) {
	fresh := false
	switch {
	case r.WebhookURL == "":
		r.WebhookSecret = ""
	case r.WebhookSecret == "":
		r.WebhookSecret, fresh = domain.NewWebhookSecret(), true
	case before == nil || before.WebhookSecret != r.WebhookSecret:
		fresh = true
	}
	if err := r.Validate(); err != nil {
		return false, err
	}
	if r.Series != nil && (before == nil || !sameSeriesID(before.Series, r.Series)) {
		if _, err := s.scheduleStore.GetSchedule(ctx, *r.Series); err != nil {
			if errors.Is(err, domain.ErrNotFound) {
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
// webhook secret, and of the webhook URL, which is often a credential
// itself, its scheme and host and a fingerprint that tells a change.
func ruleAudit(r domain.AlertRule) map[string]any {
	a := map[string]any{"id": r.ID, "name": r.Name, "kind": r.Kind, "condition": r.Describe(), "emails": r.Emails,
		"webhook_url": domain.RedactURL(r.WebhookURL), "enabled": r.Enabled, "cooldown_seconds": r.CooldownSeconds}
	if r.WebhookURL != "" {
		a["webhook_url_fingerprint"] = domain.URLFingerprint(r.WebhookURL)
	}
	return a
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
	if errors.Is(err, domain.ErrNotFound) {
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such alert rule"}
	}
	return err
}

// ruleFromPath reads the rule the :id parameter names.
func (s *server) ruleFromPath(c *fiber.Ctx) (domain.AlertRule, error) {
	id, err := ruleID(c)
	if err != nil {
		return domain.AlertRule{}, err
	}
	r, err := s.alerts.GetAlertRule(c.UserContext(), id)
	if err != nil {
		return domain.AlertRule{}, ruleNotFound(err)
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
		out[i] = s.ruleResponse(ruleForCaller(c, r), false)
	}
	return c.JSON(fiber.Map{"rules": out})
}

// getAlertRule handles GET /api/v1/alerts/rules/{id}.
func (s *server) getAlertRule(c *fiber.Ctx) error {
	r, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	return c.JSON(s.ruleResponse(ruleForCaller(c, r), false))
}

// createAlertRule handles POST /api/v1/alerts/rules.
func (s *server) createAlertRule(c *fiber.Ctx) error {
	var in alertRuleInput
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.Kind == nil {
		return invalid("kind", "is required: one of failure_rate, queue_latency, cron_overdue, no_worker, job_waiting")
	}
	r := domain.NewAlertRule(domain.AlertKind(*in.Kind))
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
	return c.Status(http.StatusCreated).JSON(s.ruleResponse(r, fresh))
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
	if in.Kind != nil && domain.AlertKind(*in.Kind) != before.Kind {
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
	return c.JSON(s.ruleResponse(r, fresh))
}

// deleteAlertRule handles DELETE /api/v1/alerts/rules/{id}.
func (s *server) deleteAlertRule(c *fiber.Ctx) error {
	if err := s.deleteRule(c); err != nil {
		return err
	}
	return c.SendStatus(http.StatusNoContent)
}

// deleteRule deletes the rule the path names and audits it; the API and
// the dashboard answer differently.
func (s *server) deleteRule(c *fiber.Ctx) error {
	r, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	if err := s.alerts.DeleteAlertRule(c.UserContext(), r.ID); err != nil {
		return ruleNotFound(err)
	}
	s.audit(c, "alert_rule_delete", ruleAudit(r))
	return nil
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
	return c.JSON(fiber.Map{"deliveries": deliveriesForCaller(c, r, res)})
}
