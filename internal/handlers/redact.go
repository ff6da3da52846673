package handlers

import (
	"encoding/json"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
)

// Alert webhook URLs are often the credential itself (whoever has a
// Slack incoming webhook's URL can post to the channel), so only admins,
// who may change them anyway, see them whole. Everyone else sees the
// scheme and host (domain.RedactURL), in rules, deliveries, test results
// and delivery errors, and on the audit trail, whose entries keep only
// that form and a fingerprint since this rule; older entries are redacted
// as they are read.

// seesSecrets reports whether the caller may see alert webhook URLs whole.
func seesSecrets(c *fiber.Ctx) bool {
	p, ok := principalOf(c)
	return ok && auth.Grants(p.scopes, auth.ScopeAdmin)
}

// ruleForCaller is r as the caller may see it.
func ruleForCaller(c *fiber.Ctx, r domain.AlertRule) domain.AlertRule {
	if !seesSecrets(c) {
		r.WebhookURL = domain.RedactURL(r.WebhookURL)
	}
	return r
}

// recordForCaller is an outbox row as the caller may see it.
func recordForCaller(c *fiber.Ctx, r domain.AlertRecord) domain.AlertRecord {
	if !seesSecrets(c) && r.WebhookURL != "" {
		r.LastError = domain.RedactURLIn(r.LastError, r.WebhookURL)
		r.WebhookURL = domain.RedactURL(r.WebhookURL)
	}
	return r
}

// deliveriesForCaller are a test's results as the caller may see them.
func deliveriesForCaller(c *fiber.Ctx, r domain.AlertRule, ds []domain.AlertDelivery) []domain.AlertDelivery {
	if seesSecrets(c) || r.WebhookURL == "" {
		return ds
	}
	out := make([]domain.AlertDelivery, len(ds))
	for i, d := range ds {
		d.Target = domain.RedactURLIn(d.Target, r.WebhookURL)
		d.Error = domain.RedactURLIn(d.Error, r.WebhookURL)
		out[i] = d
	}
	return out
}

// auditForCaller are audit entries as the caller may see them: for all
// but admins, every "webhook_url" in their details redacted (entries
// written before webhook URLs were kept redacted hold them whole), and
// the payloads an edit and replay recorded as payloadForCaller shows
// payloads.
func auditForCaller(c *fiber.Ctx, entries []domain.AuditEntry) []domain.AuditEntry {
	if seesSecrets(c) {
		return entries
	}
	out := make([]domain.AuditEntry, len(entries))
	for i, e := range entries {
		if e.Action == domain.AuditEditReplay {
			e.Details = redactReplayDetails(e.Details)
		}
		if len(e.Details) > 0 {
			var v any
			if json.Unmarshal(e.Details, &v) == nil && redactWebhookURLs(v) {
				e.Details, _ = json.Marshal(v)
			}
		}
		out[i] = e
	}
	return out
}

// redactWebhookURLs redacts, in place, the string value of every
// "webhook_url" key in v at any depth, and reports whether it changed any.
func redactWebhookURLs(v any) bool {
	changed := false
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if s, ok := x.(string); ok && k == "webhook_url" {
				if r := domain.RedactURL(s); r != s {
					t[k], changed = r, true
				}
				continue
			}
			changed = redactWebhookURLs(x) || changed
		}
	case []any:
		for _, x := range t {
			changed = redactWebhookURLs(x) || changed
		}
	}
	return changed
}
