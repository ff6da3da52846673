package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
)

const alertRuleColumns = `id, name, kind, type, queue, series, threshold, window_seconds, min_runs, grace_seconds,
	cooldown_seconds, emails, webhook_url, webhook_secret, enabled, created_at, updated_at`

const listAlertRulesSQL = `SELECT ` + alertRuleColumns + ` FROM alert_rules ORDER BY id`

const listEnabledAlertRulesSQL = `SELECT ` + alertRuleColumns + ` FROM alert_rules WHERE enabled ORDER BY id`

const getAlertRuleSQL = `SELECT ` + alertRuleColumns + ` FROM alert_rules WHERE id = $1`

const insertAlertRuleSQL = `
INSERT INTO alert_rules (name, kind, type, queue, series, threshold, window_seconds, min_runs, grace_seconds,
	cooldown_seconds, emails, webhook_url, webhook_secret, enabled)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
RETURNING id`

const updateAlertRuleSQL = `
UPDATE alert_rules SET name = $2, kind = $3, type = $4, queue = $5, series = $6, threshold = $7, window_seconds = $8,
	min_runs = $9, grace_seconds = $10, cooldown_seconds = $11, emails = $12, webhook_url = $13, webhook_secret = $14,
	enabled = $15, updated_at = now()
WHERE id = $1`

// closeRuleAlertsSQL resolves a rule's open alerts without a notification:
// the rule was disabled or its condition changed, so they no longer mean
// what they said.
const closeRuleAlertsSQL = `UPDATE alerts SET resolved_at = now() WHERE rule_id = $1 AND resolved_at IS NULL`

const deleteAlertRuleSQL = `DELETE FROM alert_rules WHERE id = $1`

// alertRuleRow is an alert_rules row.
type alertRuleRow struct {
	ID              int64      `db:"id"`
	Name            string     `db:"name"`
	Kind            string     `db:"kind"`
	Type            string     `db:"type"`
	Queue           string     `db:"queue"`
	Series          *uuid.UUID `db:"series"`
	Threshold       float64    `db:"threshold"`
	WindowSeconds   int        `db:"window_seconds"`
	MinRuns         int        `db:"min_runs"`
	GraceSeconds    int        `db:"grace_seconds"`
	CooldownSeconds int        `db:"cooldown_seconds"`
	Emails          textArray  `db:"emails"`
	WebhookURL      string     `db:"webhook_url"`
	WebhookSecret   string     `db:"webhook_secret"`
	Enabled         bool       `db:"enabled"`
	CreatedAt       time.Time  `db:"created_at"`
	UpdatedAt       time.Time  `db:"updated_at"`
}

func (r alertRuleRow) rule() domain.AlertRule {
	emails := []string(r.Emails)
	if emails == nil {
		emails = []string{}
	}
	return domain.AlertRule{ID: r.ID, Name: r.Name, Kind: domain.AlertKind(r.Kind), Type: r.Type, Queue: r.Queue, Series: r.Series,
		Threshold: r.Threshold, WindowSeconds: r.WindowSeconds, MinRuns: r.MinRuns, GraceSeconds: r.GraceSeconds,
		CooldownSeconds: r.CooldownSeconds, Emails: emails, WebhookURL: r.WebhookURL, WebhookSecret: r.WebhookSecret,
		Enabled: r.Enabled, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func (s *Store) selectAlertRules(ctx context.Context, query string, args ...any) ([]domain.AlertRule, error) {
	var rows []alertRuleRow
	if err := s.sqlx.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("read alert rules: %w", err)
	}
	out := make([]domain.AlertRule, len(rows))
	for i, r := range rows {
		out[i] = r.rule()
	}
	return out, nil
}

// ListAlertRules returns every alert rule, oldest first.
func (s *Store) ListAlertRules(ctx context.Context) ([]domain.AlertRule, error) {
	return s.selectAlertRules(ctx, listAlertRulesSQL)
}

// GetAlertRule returns one rule, or an error wrapping domain.ErrNotFound.
func (s *Store) GetAlertRule(ctx context.Context, id int64) (domain.AlertRule, error) {
	rules, err := s.selectAlertRules(ctx, getAlertRuleSQL, id)
	if err != nil {
		return domain.AlertRule{}, err
	}
	if len(rules) == 0 {
		return domain.AlertRule{}, fmt.Errorf("no such alert rule: %w", domain.ErrNotFound)
	}
	return rules[0], nil
}

// CreateAlertRule stores a validated rule and returns it as stored.
func (s *Store) CreateAlertRule(ctx context.Context, r domain.AlertRule) (domain.AlertRule, error) {
	var id int64
	err := s.pool.QueryRow(ctx, insertAlertRuleSQL, r.Name, string(r.Kind), r.Type, r.Queue, r.Series, r.Threshold,
		r.WindowSeconds, r.MinRuns, r.GraceSeconds, r.CooldownSeconds, r.Emails, r.WebhookURL, r.WebhookSecret, r.Enabled).Scan(&id)
	if err != nil {
		return domain.AlertRule{}, fmt.Errorf("create alert rule: %w", err)
	}
	return s.GetAlertRule(ctx, id)
}

// UpdateAlertRule stores a validated rule over the one with its id. When
// the change disables the rule or changes what it watches, its open alerts
// are closed without a notification; the next evaluation starts afresh.
func (s *Store) UpdateAlertRule(ctx context.Context, before, r domain.AlertRule) (domain.AlertRule, error) {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, updateAlertRuleSQL, r.ID, r.Name, string(r.Kind), r.Type, r.Queue, r.Series, r.Threshold,
			r.WindowSeconds, r.MinRuns, r.GraceSeconds, r.CooldownSeconds, r.Emails, r.WebhookURL, r.WebhookSecret, r.Enabled)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("no such alert rule: %w", domain.ErrNotFound)
		}
		if !r.Enabled || conditionChanged(before, r) {
			_, err = tx.Exec(ctx, closeRuleAlertsSQL, r.ID)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			return domain.AlertRule{}, err
		}
		return domain.AlertRule{}, fmt.Errorf("update alert rule: %w", err)
	}
	return s.GetAlertRule(ctx, r.ID)
}

// conditionChanged reports whether a rule now watches something else.
func conditionChanged(a, b domain.AlertRule) bool {
	return a.Kind != b.Kind || a.Type != b.Type || a.Queue != b.Queue || !sameSeries(a.Series, b.Series) ||
		a.Threshold != b.Threshold || a.WindowSeconds != b.WindowSeconds || a.MinRuns != b.MinRuns || a.GraceSeconds != b.GraceSeconds
}

func sameSeries(a, b *uuid.UUID) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// DeleteAlertRule removes a rule and its alerts.
func (s *Store) DeleteAlertRule(ctx context.Context, id int64) error {
	tag, err := s.pool.Exec(ctx, deleteAlertRuleSQL, id)
	if err != nil {
		return fmt.Errorf("delete alert rule: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("no such alert rule: %w", domain.ErrNotFound)
	}
	return nil
}

const listAlertsSQL = `
SELECT a.id, a.rule_id, r.name AS rule_name, r.kind, a.subject, a.value, a.message, a.fired_at, a.last_notified_at,
       a.notifications, a.resolved_at
FROM alerts a JOIN alert_rules r ON r.id = a.rule_id
WHERE ($1::text = '' OR ($1::text = 'firing') = (a.resolved_at IS NULL))
  AND ($2::bigint = 0 OR a.rule_id = $2) AND ($3::bigint = 0 OR a.id < $3)
ORDER BY a.id DESC
LIMIT $4`

// alertListRow is an alerts row with its rule's name and kind.
type alertListRow struct {
	ID             int64      `db:"id"`
	RuleID         int64      `db:"rule_id"`
	RuleName       string     `db:"rule_name"`
	Kind           string     `db:"kind"`
	Subject        string     `db:"subject"`
	Value          float64    `db:"value"`
	Message        string     `db:"message"`
	FiredAt        time.Time  `db:"fired_at"`
	LastNotifiedAt time.Time  `db:"last_notified_at"`
	Notifications  int        `db:"notifications"`
	ResolvedAt     *time.Time `db:"resolved_at"`
}

// ListAlerts returns the alerts q selects, newest first, q.Limit of them
// (100 when it is zero or above 500).
func (s *Store) ListAlerts(ctx context.Context, q domain.AlertQuery) ([]domain.Alert, error) {
	limit := q.Limit
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var rows []alertListRow
	if err := s.sqlx.SelectContext(ctx, &rows, listAlertsSQL, q.Status, q.RuleID, q.Before, limit); err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	out := make([]domain.Alert, len(rows))
	for i, r := range rows {
		out[i] = domain.Alert{ID: r.ID, RuleID: r.RuleID, RuleName: r.RuleName, Kind: domain.AlertKind(r.Kind), Subject: r.Subject,
			Value: r.Value, Message: r.Message, FiredAt: r.FiredAt, LastNotifiedAt: r.LastNotifiedAt,
			Notifications: r.Notifications, ResolvedAt: r.ResolvedAt}
	}
	return out, nil
}

const alertsMarkSQL = `
SELECT concat_ws(':', (SELECT coalesce(max(id), 0) FROM alerts),
	(SELECT count(*) FROM alerts WHERE resolved_at IS NULL),
	(SELECT coalesce(max(last_notified_at)::text, '') FROM alerts WHERE resolved_at IS NULL),
	(SELECT coalesce(max(id), 0) FROM alert_outbox),
	(SELECT count(*) FROM alert_outbox WHERE sent_at IS NULL AND failed_at IS NULL),
	(SELECT coalesce(max(updated_at)::text, '') || count(*) FROM alert_rules))`

// AlertsMark is a fingerprint of what the Alerts page shows: it changes
// when an alert fires, repeats or resolves, a notification is queued or
// leaves the outbox, or a rule changes.
func (s *Store) AlertsMark(ctx context.Context) (string, error) {
	var mark string
	if err := s.pool.QueryRow(ctx, alertsMarkSQL).Scan(&mark); err != nil {
		return "", fmt.Errorf("alerts mark: %w", err)
	}
	return mark, nil
}
