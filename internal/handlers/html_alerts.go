// The Alerts page and the alert rule form.

package handlers

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// alertsView reads what the Alerts page shows.
func (s *server) alertsView(c *fiber.Ctx) (views.AlertsPage, error) {
	ctx := c.UserContext()
	var p views.AlertsPage
	var err error
	if p.Firing, err = s.alerts.ListAlerts(ctx, domain.AlertQuery{Status: "firing", Limit: 100}); err != nil {
		return p, err
	}
	if p.Rules, err = s.alerts.ListAlertRules(ctx); err != nil {
		return p, err
	}
	if p.History, err = s.alerts.ListAlerts(ctx, domain.AlertQuery{Limit: 50}); err != nil {
		return p, err
	}
	p.Reach = map[int64][]string{}
	for i := range p.Rules {
		p.Rules[i] = ruleForCaller(c, p.Rules[i])
		p.Reach[p.Rules[i].ID] = p.Rules[i].Reach(s.alertEmails())
	}
	ids := make([]int64, len(p.Firing))
	for i, a := range p.Firing {
		ids[i] = a.ID
	}
	if p.Sent, err = s.alerts.AlertDeliveries(ctx, ids, 5); err != nil {
		return p, err
	}
	for id, recs := range p.Sent {
		for i := range recs {
			recs[i] = recordForCaller(c, recs[i])
		}
		p.Sent[id] = recs
	}
	p.Deliveries, err = s.alerts.AlertOutbox(ctx, 20)
	for i := range p.Deliveries {
		p.Deliveries[i] = recordForCaller(c, p.Deliveries[i])
	}
	return p, err
}

// alertsPage handles GET /alerts (and its live part).
func (s *server) alertsPage(c *fiber.Ctx) error {
	p, err := s.alertsView(c)
	if err != nil {
		return err
	}
	if isHX(c) && c.Get("HX-Target") == "alerts-live" {
		return render(c, http.StatusOK, views.AlertsLive(p))
	}
	return render(c, http.StatusOK, views.AlertsPageView(s.chrome(c, "Alerts", "alerts", true), p))
}

// ruleValues is a rule as the form shows it, in the form's units.
func ruleValues(r domain.AlertRule) map[string]string {
	v := map[string]string{
		"name":             r.Name,
		"type":             r.Type,
		"queue":            r.Queue,
		"window_minutes":   strconv.Itoa(r.WindowMinutes()),
		"min_runs":         strconv.Itoa(r.MinRuns),
		"grace_minutes":    minutes(r.GraceSeconds),
		"cooldown_minutes": minutes(r.CooldownSeconds),
		"emails":           strings.Join(r.Emails, ", "),
		"webhook_url":      r.WebhookURL,
		"enabled":          strconv.FormatBool(r.Enabled),
	}
	if r.Series != nil {
		v["series"] = r.Series.String()
	}
	switch r.Kind {
	case domain.AlertFailureRate:
		v["threshold_percent"] = strconv.FormatFloat(math.Round(r.Threshold*1000)/10, 'f', -1, 64)
	case domain.AlertQueueLatency, domain.AlertJobWaiting:
		v["threshold_minutes"] = minutes(int(r.Threshold))
	}
	return v
}

func minutes(seconds int) string {
	return strconv.FormatFloat(math.Round(float64(seconds)/6)/10, 'f', -1, 64)
}

// formRule reads the rule form over base, naming the form field of the
// first value it cannot read.
func formRule(c *fiber.Ctx, base domain.AlertRule) (domain.AlertRule, map[string]string, error) {
	r := base
	values := map[string]string{}
	for _, k := range []string{"name", "type", "queue", "series", "threshold_percent", "threshold_minutes", "window_minutes",
		"min_runs", "grace_minutes", "cooldown_minutes", "emails", "webhook_url", "enabled"} {
		values[k] = strings.TrimSpace(c.FormValue(k))
	}
	r.Name, r.Type, r.Queue, r.WebhookURL = values["name"], values["type"], values["queue"], values["webhook_url"]
	r.Enabled = values["enabled"] == "true"
	if secret := c.FormValue("webhook_secret"); secret != "" {
		r.WebhookSecret = secret
	}
	r.Emails = strings.FieldsFunc(values["emails"], func(r rune) bool { return r == ',' || r == ' ' || r == ';' || r == '\n' })
	if r.Emails == nil {
		r.Emails = []string{}
	}
	fields := map[string]bool{"threshold_percent": false, "threshold_minutes": false, "window_minutes": false, "min_runs": false, "grace_minutes": false}
	switch r.Kind {
	case domain.AlertFailureRate:
		fields["threshold_percent"], fields["window_minutes"], fields["min_runs"] = true, true, true
	case domain.AlertQueueLatency, domain.AlertJobWaiting:
		fields["threshold_minutes"] = true
	case domain.AlertCronOverdue, domain.AlertNoWorker:
		fields["grace_minutes"] = true
	}
	num := func(name string) (float64, error) {
		n, err := strconv.ParseFloat(values[name], 64)
		if err != nil || math.IsNaN(n) || math.IsInf(n, 0) {
			return 0, invalid(name, "must be a number")
		}
		return n, nil
	}
	if fields["threshold_percent"] {
		n, err := num("threshold_percent")
		if err != nil {
			return r, values, err
		}
		r.Threshold = n / 100
	}
	if fields["threshold_minutes"] {
		n, err := num("threshold_minutes")
		if err != nil {
			return r, values, err
		}
		r.Threshold = math.Round(n * 60)
	}
	for _, f := range []struct {
		name  string
		dst   *int
		scale float64
	}{{"window_minutes", &r.WindowSeconds, 60}, {"min_runs", &r.MinRuns, 1}, {"grace_minutes", &r.GraceSeconds, 60}, {"cooldown_minutes", &r.CooldownSeconds, 60}} {
		if f.name != "cooldown_minutes" && !fields[f.name] {
			continue
		}
		n, err := num(f.name)
		if err != nil {
			return r, values, err
		}
		if math.Abs(n*f.scale) > math.MaxInt32 {
			return r, values, invalid(f.name, "is too large")
		}
		*f.dst = int(math.Round(n * f.scale))
	}
	r.Series = nil
	if values["series"] != "" && r.Kind == domain.AlertCronOverdue {
		id, err := uuid.Parse(values["series"])
		if err != nil {
			return r, values, invalid("series", "pick a recurring series from the list")
		}
		r.Series = &id
	}
	return r, values, nil
}

// formFieldOf maps a rule field named by validation to the form's field.
func formFieldOf(kind domain.AlertKind, field string) string {
	switch field {
	case "threshold":
		if kind == domain.AlertQueueLatency || kind == domain.AlertJobWaiting {
			return "threshold_minutes"
		}
		return "threshold_percent"
	case "window_seconds":
		return "window_minutes"
	case "grace_seconds":
		return "grace_minutes"
	case "cooldown_seconds":
		return "cooldown_minutes"
	}
	if i := strings.IndexByte(field, '['); i > 0 {
		return field[:i]
	}
	return field
}

// ruleForm builds the form view, with the series to pick from.
func (s *server) ruleForm(c *fiber.Ctx, id int64, kind domain.AlertKind, values map[string]string) (views.RuleForm, error) {
	f := views.RuleForm{ID: id, Kind: kind, Values: values, Errors: map[string]string{}, NoFallback: len(s.alertEmails()) == 0}
	if kind == domain.AlertCronOverdue {
		series, err := s.scheduleStore.ListSchedules(c.UserContext())
		if err != nil {
			return f, err
		}
		f.Series = series
	}
	return f, nil
}

// ruleFormError shows a refused save on the form: 422 with the message
// beside the field it names.
func (s *server) ruleFormError(c *fiber.Ctx, id int64, kind domain.AlertKind, values map[string]string, err error) error {
	field, msg := "", ""
	var ae *apiError
	var ve *jobs.ValidationError
	switch {
	case errors.As(err, &ae) && ae.Status < 500:
		field, msg = ae.Field, ae.Message
	case errors.As(err, &ve):
		field, msg = ve.Field, ve.Message
	default:
		return err
	}
	f, ferr := s.ruleForm(c, id, kind, values)
	if ferr != nil {
		return ferr
	}
	field = formFieldOf(kind, field)
	if field == "" || field == "webhook_secret" && values["webhook_url"] == "" {
		f.Message = msg
	} else {
		f.Errors[field] = msg
	}
	return render(c, http.StatusUnprocessableEntity, views.RuleFormPartial(f))
}

// newRulePage handles GET /alerts/rules/new?kind=…; the kind picker
// re-renders the form for another kind, keeping what was typed.
func (s *server) newRulePage(c *fiber.Ctx) error {
	kind := domain.AlertKind(c.Query("kind", string(domain.AlertFailureRate)))
	if unknownKind(kind) {
		kind = domain.AlertFailureRate
	}
	values := ruleValues(domain.NewAlertRule(kind))
	if isHX(c) {
		for _, k := range []string{"name", "emails", "webhook_url"} {
			values[k] = strings.TrimSpace(c.Query(k))
		}
	}
	f, err := s.ruleForm(c, 0, kind, values)
	if err != nil {
		return err
	}
	if isHX(c) {
		return render(c, http.StatusOK, views.RuleFormPartial(f))
	}
	return render(c, http.StatusOK, views.RulePage(s.chrome(c, "New alert rule", "alerts", false), f))
}

// unknownKind reports whether kind is none of the rule kinds.
func unknownKind(kind domain.AlertKind) bool {
	for _, k := range domain.AlertKinds {
		if k == kind {
			return false
		}
	}
	return true
}

// createRuleHTML handles POST /alerts/rules.
func (s *server) createRuleHTML(c *fiber.Ctx) error {
	kind := domain.AlertKind(c.FormValue("kind"))
	if unknownKind(kind) {
		return s.ruleFormError(c, 0, domain.AlertFailureRate, ruleValues(domain.NewAlertRule(domain.AlertFailureRate)),
			invalid("kind", "pick what the rule watches"))
	}
	r, values, err := formRule(c, domain.NewAlertRule(kind))
	if err != nil {
		return s.ruleFormError(c, 0, kind, values, err)
	}
	fresh, err := s.prepareRule(c.UserContext(), &r, nil)
	if err != nil {
		return s.ruleFormError(c, 0, kind, values, err)
	}
	if r, err = s.alerts.CreateAlertRule(c.UserContext(), r); err != nil {
		return err
	}
	s.audit(c, "alert_rule_create", ruleAudit(r))
	toast(c, "Rule created.", toastOK)
	saved := views.RuleSaved{Rule: r, New: true, Reaches: r.Reach(s.alertEmails())}
	if fresh {
		saved.Secret = r.WebhookSecret
	}
	return render(c, http.StatusOK, views.RuleSavedPartial(saved))
}

// editRulePage handles GET /alerts/rules/{id}.
func (s *server) editRulePage(c *fiber.Ctx) error {
	r, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	f, err := s.ruleForm(c, r.ID, r.Kind, ruleValues(ruleForCaller(c, r)))
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.RulePage(s.chrome(c, "Alert rule "+r.Name, "alerts", false), f))
}

// saveRuleHTML handles POST /alerts/rules/{id}.
func (s *server) saveRuleHTML(c *fiber.Ctx) error {
	before, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	id := before.ID
	r, values, err := formRule(c, before)
	if err != nil {
		return s.ruleFormError(c, id, before.Kind, values, err)
	}
	fresh, err := s.prepareRule(c.UserContext(), &r, &before)
	if err != nil {
		return s.ruleFormError(c, id, before.Kind, values, err)
	}
	if r, err = s.alerts.UpdateAlertRule(c.UserContext(), before, r); err != nil {
		return ruleNotFound(err)
	}
	s.audit(c, "alert_rule_update", map[string]any{"before": ruleAudit(before), "after": ruleAudit(r)})
	toast(c, "Rule saved.", toastOK)
	saved := views.RuleSaved{Rule: r, Reaches: r.Reach(s.alertEmails())}
	if fresh {
		saved.Secret = r.WebhookSecret
	}
	return render(c, http.StatusOK, views.RuleSavedPartial(saved))
}

// deleteRuleHTML handles POST /alerts/rules/{id}/delete.
func (s *server) deleteRuleHTML(c *fiber.Ctx) error {
	if err := s.deleteRule(c); err != nil {
		return err
	}
	toast(c, "Rule deleted.", toastOK)
	return redirectHX(c, "/alerts")
}

// testRuleHTML handles POST /alerts/rules/{id}/test: the result goes
// beside the rule's button.
func (s *server) testRuleHTML(c *fiber.Ctx) error {
	r, err := s.ruleFromPath(c)
	if err != nil {
		return err
	}
	t := views.RuleTest{RuleID: r.ID, RuleName: r.Name, Deliveries: deliveriesForCaller(c, r, s.alertTest(c.UserContext(), r))}
	if len(t.Deliveries) == 0 {
		t.Message = errNowhereToSend.Message
	}
	return render(c, http.StatusOK, views.RuleTestResult(t))
}
