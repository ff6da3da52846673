package handlers

import (
	"context"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/flinthq/flint/internal/domain"
)

// AlertStore keeps alert rules and what they found; *db.Store implements it.
type AlertStore interface {
	// ListAlertRules returns every alert rule, oldest first.
	ListAlertRules(ctx context.Context) ([]domain.AlertRule, error)
	// GetAlertRule returns one rule; an error wrapping domain.ErrNotFound
	// when there is none.
	GetAlertRule(ctx context.Context, id int64) (domain.AlertRule, error)
	// CreateAlertRule stores a validated rule and returns it as stored.
	CreateAlertRule(ctx context.Context, r domain.AlertRule) (domain.AlertRule, error)
	// UpdateAlertRule stores a validated rule r over before, the one with
	// its id; an alert open under a rule that no longer watches the same
	// thing is closed without a notification.
	UpdateAlertRule(ctx context.Context, before, r domain.AlertRule) (domain.AlertRule, error)
	// DeleteAlertRule removes a rule and its alerts.
	DeleteAlertRule(ctx context.Context, id int64) error
	// ListAlerts returns the alerts q asks for, newest first.
	ListAlerts(ctx context.Context, q domain.AlertQuery) ([]domain.Alert, error)
	// AlertOutbox returns up to limit of the latest notifications, newest
	// first: sent, waiting for a retry or given up.
	AlertOutbox(ctx context.Context, limit int) ([]domain.AlertRecord, error)
	// AlertDeliveries returns the notifications of the given alerts, up
	// to perAlert of each, newest first.
	AlertDeliveries(ctx context.Context, alertIDs []int64, perAlert int) (map[int64][]domain.AlertRecord, error)
	// AlertsMark is a fingerprint of what the Alerts page shows, which
	// changes whenever the page would: the live stream polls it.
	AlertsMark(ctx context.Context) (string, error)
}

// AlertTester sends a rule's test notification to each of its channels now.
type AlertTester func(ctx context.Context, r domain.AlertRule) []domain.AlertDelivery

// alertQuery reads status, rule_id, before and limit.
func alertQuery(c *fiber.Ctx) (domain.AlertQuery, error) {
	q := domain.AlertQuery{Status: c.Query("status"), Limit: 100}
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
		alerts = []domain.Alert{}
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
func deliveryStatus(r domain.AlertRecord) string {
	switch {
	case r.SentAt != nil:
		return "sent"
	case r.FailedAt != nil:
		return "failed"
	}
	return "pending"
}

// listAlertDeliveries handles GET /api/v1/alerts/deliveries: the latest
// notifications (of one alert, with alert_id) and how their delivery
// went.
func (s *server) listAlertDeliveries(c *fiber.Ctx) error {
	limit, err := limitQuery(c, 50)
	if err != nil {
		return err
	}
	var recs []domain.AlertRecord
	if v := c.Query("alert_id"); v != "" {
		id, perr := strconv.ParseInt(v, 10, 64)
		if perr != nil || id < 1 {
			return invalid("alert_id", "must be an alert id")
		}
		byAlert, err := s.alerts.AlertDeliveries(c.UserContext(), []int64{id}, limit)
		if err != nil {
			return err
		}
		recs = byAlert[id]
	} else if recs, err = s.alerts.AlertOutbox(c.UserContext(), limit); err != nil {
		return err
	}
	out := make([]alertDelivery, len(recs))
	for i, r := range recs {
		r = recordForCaller(c, r)
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
