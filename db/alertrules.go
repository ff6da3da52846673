package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"flint/jobs"
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

func (r alertRuleRow) rule() jobs.AlertRule {
	emails := []string(r.Emails)
	if emails == nil {
		emails = []string{}
	}
	return jobs.AlertRule{ID: r.ID, Name: r.Name, Kind: jobs.AlertKind(r.Kind), Type: r.Type, Queue: r.Queue, Series: r.Series,
		Threshold: r.Threshold, WindowSeconds: r.WindowSeconds, MinRuns: r.MinRuns, GraceSeconds: r.GraceSeconds,
		CooldownSeconds: r.CooldownSeconds, Emails: emails, WebhookURL: r.WebhookURL, WebhookSecret: r.WebhookSecret,
		Enabled: r.Enabled, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

func (s *Store) selectAlertRules(ctx context.Context, query string, args ...any) ([]jobs.AlertRule, error) {
	var rows []alertRuleRow
	if err := s.sqlx.SelectContext(ctx, &rows, query, args...); err != nil {
		return nil, fmt.Errorf("read alert rules: %w", err)
	}
	out := make([]jobs.AlertRule, len(rows))
	for i, r := range rows {
		out[i] = r.rule()
	}
	return out, nil
}

// ListAlertRules returns every alert rule, oldest first.
func (s *Store) ListAlertRules(ctx context.Context) ([]jobs.AlertRule, error) {
	return s.selectAlertRules(ctx, listAlertRulesSQL)
}

// GetAlertRule returns one rule, or an error wrapping jobs.ErrNotFound.
func (s *Store) GetAlertRule(ctx context.Context, id int64) (jobs.AlertRule, error) {
	rules, err := s.selectAlertRules(ctx, getAlertRuleSQL, id)
	if err != nil {
		return jobs.AlertRule{}, err
	}
	if len(rules) == 0 {
		return jobs.AlertRule{}, fmt.Errorf("no such alert rule: %w", jobs.ErrNotFound)
	}
	return rules[0], nil
}

// CreateAlertRule stores a validated rule and returns it as stored.
func (s *Store) CreateAlertRule(ctx context.Context, r jobs.AlertRule) (jobs.AlertRule, error) {
	var id int64
	err := s.pool.QueryRow(ctx, insertAlertRuleSQL, r.Name, string(r.Kind), r.Type, r.Queue, r.Series, r.Threshold,
		r.WindowSeconds, r.MinRuns, r.GraceSeconds, r.CooldownSeconds, r.Emails, r.WebhookURL, r.WebhookSecret, r.Enabled).Scan(&id)
	if err != nil {
		return jobs.AlertRule{}, fmt.Errorf("create alert rule: %w", err)
	}
	return s.GetAlertRule(ctx, id)
}

// UpdateAlertRule stores a validated rule over the one with its id. When
// the change disables the rule or changes what it watches, its open alerts
// are closed without a notification; the next evaluation starts afresh.
func (s *Store) UpdateAlertRule(ctx context.Context, before, r jobs.AlertRule) (jobs.AlertRule, error) {
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, updateAlertRuleSQL, r.ID, r.Name, string(r.Kind), r.Type, r.Queue, r.Series, r.Threshold,
			r.WindowSeconds, r.MinRuns, r.GraceSeconds, r.CooldownSeconds, r.Emails, r.WebhookURL, r.WebhookSecret, r.Enabled)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("no such alert rule: %w", jobs.ErrNotFound)
		}
		if !r.Enabled || conditionChanged(before, r) {
			_, err = tx.Exec(ctx, closeRuleAlertsSQL, r.ID)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, jobs.ErrNotFound) {
			return jobs.AlertRule{}, err
		}
		return jobs.AlertRule{}, fmt.Errorf("update alert rule: %w", err)
	}
	return s.GetAlertRule(ctx, r.ID)
}

// conditionChanged reports whether a rule now watches something else.
func conditionChanged(a, b jobs.AlertRule) bool {
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
		return fmt.Errorf("no such alert rule: %w", jobs.ErrNotFound)
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

// ListAlerts returns alerts newest first.
func (s *Store) ListAlerts(ctx context.Context, q jobs.AlertQuery) ([]jobs.Alert, error) {
	limit := q.Limit
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	var rows []alertListRow
	if err := s.sqlx.SelectContext(ctx, &rows, listAlertsSQL, q.Status, q.RuleID, q.Before, limit); err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	out := make([]jobs.Alert, len(rows))
	for i, r := range rows {
		out[i] = jobs.Alert{ID: r.ID, RuleID: r.RuleID, RuleName: r.RuleName, Kind: jobs.AlertKind(r.Kind), Subject: r.Subject,
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

// Evaluation.

const rulesTurnSQL = `
INSERT INTO loop_leases (name, last_run_at, holder) VALUES ('alert_rules', '-infinity', '')
ON CONFLICT (name) DO NOTHING`

const lockRulesTurnSQL = `SELECT greatest(last_run_at, 'epoch'::timestamptz) FROM loop_leases WHERE name = 'alert_rules' FOR UPDATE`

const markRulesTurnSQL = `UPDATE loop_leases SET last_run_at = $1 WHERE name = 'alert_rules'`

// failureRunsSQL counts, per type, the runs that finished in the last $1
// minutes (the current one included) and how many of them failed.
const failureRunsSQL = `
SELECT type, coalesce(sum(n) FILTER (WHERE outcome IN ('succeeded', 'failed')), 0)::bigint,
       coalesce(sum(n) FILTER (WHERE outcome = 'failed'), 0)::bigint
FROM job_throughput
WHERE bucket >= date_trunc('minute', now()) - ($1::integer - 1) * interval '1 minute'
  AND type <> '' AND ($2::text = '' OR type = $2)
GROUP BY type`

// waitingSQL summarises the waiting jobs per queue: an index-only scan of
// the claim index, which holds only waiting jobs.
const waitingSQL = `
SELECT queue, count(*), min(run_at) FROM jobs
WHERE status = 'queued' AND deleted_at IS NULL
GROUP BY queue`

const servedQueuesSQL = `SELECT queues FROM workers WHERE heartbeat_at > now() - $1 * interval '1 millisecond'`

const overdueSeriesSQL = `
SELECT id, type, next_run_at, coalesce(cron, interval_seconds || ' s')
FROM job_schedules
WHERE NOT paused AND next_run_at < now() - $1 * interval '1 second'
ORDER BY next_run_at
LIMIT 1000`

const openAlertsSQL = `
SELECT id, rule_id, subject, last_notified_at, fired_at, notifications FROM alerts WHERE resolved_at IS NULL`

const fireAlertSQL = `
INSERT INTO alerts (rule_id, subject, value, message, fired_at, last_notified_at) VALUES ($1, $2, $3, $4, $5, $5)
RETURNING id`

const refreshAlertSQL = `
UPDATE alerts SET value = $2, message = $3,
	last_notified_at = CASE WHEN $4 THEN $5 ELSE last_notified_at END,
	notifications = notifications + CASE WHEN $4 THEN 1 ELSE 0 END
WHERE id = $1`

const resolveAlertSQL = `UPDATE alerts SET resolved_at = $2 WHERE id = $1`

const queueNotificationSQL = `
INSERT INTO alert_outbox (channel, recipients, subject, text_body, html_body, webhook_url, webhook_secret, alert_id)
VALUES ($1, coalesce($2::text[], '{}'), $3, $4, $5, $6, $7, $8)`

// openAlert is the part of an open alert the evaluation needs.
type openAlert struct {
	id            int64
	ruleID        int64
	subject       string
	lastNotified  time.Time
	firedAt       time.Time
	notifications int
}

// EvaluateAlertRules evaluates the enabled rules for the whole cluster, at
// most once per interval whichever process asks (the database decides):
// a condition that starts to hold opens an alert and notifies; one that
// holds still notifies again once its rule's cooldown has passed; one that
// stopped holding resolves its alert and notifies that. The notifications
// render returns go to the outbox in the same transaction, so none is lost
// and none is sent twice. It returns whether this call evaluated and how
// many notifications it queued.
func (s *Store) EvaluateAlertRules(ctx context.Context, interval time.Duration,
	render func(jobs.AlertNotice) ([]jobs.Notification, error)) (evaluated bool, queued int, err error) {
	rules, err := s.selectAlertRules(ctx, listEnabledAlertRulesSQL)
	if err != nil {
		return false, 0, err
	}
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		evaluated, queued = false, 0
		if _, err := tx.Exec(ctx, rulesTurnSQL); err != nil {
			return err
		}
		var last, now time.Time
		if err := tx.QueryRow(ctx, lockRulesTurnSQL).Scan(&last); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
			return err
		}
		if now.Sub(last) < interval {
			return nil
		}
		evaluated = true
		facts, err := alertFacts(ctx, tx, rules, now)
		if err != nil {
			return err
		}
		open, err := openAlerts(ctx, tx)
		if err != nil {
			return err
		}
		notify := func(n jobs.AlertNotice) error {
			msgs, err := render(n)
			if err != nil {
				return err
			}
			for _, m := range msgs {
				if _, err := tx.Exec(ctx, queueNotificationSQL, m.Channel, m.Email.To, m.Email.Subject, m.Email.Text,
					m.Email.HTML, m.WebhookURL, m.WebhookSecret, n.Alert.ID); err != nil {
					return err
				}
				queued++
			}
			return nil
		}
		for _, r := range rules {
			alert := func(f jobs.AlertFinding) jobs.Alert {
				return jobs.Alert{RuleID: r.ID, RuleName: r.Name, Kind: r.Kind, Subject: f.Subject, Value: f.Value,
					Message: f.Message, FiredAt: now, LastNotifiedAt: now, Notifications: 1}
			}
			holds := map[string]bool{}
			for _, f := range r.Evaluate(&facts) {
				holds[f.Subject] = true
				a := alert(f)
				if o, ok := open[openKey{r.ID, f.Subject}]; ok {
					repeat := now.Sub(o.lastNotified) >= time.Duration(r.CooldownSeconds)*time.Second
					if _, err := tx.Exec(ctx, refreshAlertSQL, o.id, f.Value, f.Message, repeat, now); err != nil {
						return err
					}
					if repeat {
						a.ID, a.FiredAt, a.Notifications = o.id, o.firedAt, o.notifications+1
						if err := notify(jobs.AlertNotice{Event: jobs.AlertRepeat, Rule: r, Alert: a}); err != nil {
							return err
						}
					}
					continue
				}
				if err := tx.QueryRow(ctx, fireAlertSQL, r.ID, f.Subject, f.Value, f.Message, now).Scan(&a.ID); err != nil {
					return err
				}
				if err := notify(jobs.AlertNotice{Event: jobs.AlertFiring, Rule: r, Alert: a}); err != nil {
					return err
				}
			}
			for k, o := range open {
				if k.rule != r.ID || holds[k.subject] {
					continue
				}
				if _, err := tx.Exec(ctx, resolveAlertSQL, o.id, now); err != nil {
					return err
				}
				resolved := now
				a := jobs.Alert{ID: o.id, RuleID: r.ID, RuleName: r.Name, Kind: r.Kind, Subject: o.subject, FiredAt: o.firedAt,
					LastNotifiedAt: o.lastNotified, Notifications: o.notifications, ResolvedAt: &resolved,
					Message: fmt.Sprintf("resolved: %s no longer holds for %s", r.Describe(), o.subject)}
				if err := notify(jobs.AlertNotice{Event: jobs.AlertResolved, Rule: r, Alert: a}); err != nil {
					return err
				}
			}
		}
		_, err = tx.Exec(ctx, markRulesTurnSQL, now)
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("evaluate alert rules: %w", err)
	}
	return evaluated, queued, nil
}

type openKey struct {
	rule    int64
	subject string
}

func openAlerts(ctx context.Context, tx pgx.Tx) (map[openKey]openAlert, error) {
	rows, err := tx.Query(ctx, openAlertsSQL)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[openKey]openAlert{}
	for rows.Next() {
		var o openAlert
		if err := rows.Scan(&o.id, &o.ruleID, &o.subject, &o.lastNotified, &o.firedAt, &o.notifications); err != nil {
			return nil, err
		}
		out[openKey{o.ruleID, o.subject}] = o
	}
	return out, rows.Err()
}

// alertFacts reads what the rules need, and only that.
func alertFacts(ctx context.Context, tx pgx.Tx, rules []jobs.AlertRule, now time.Time) (jobs.AlertFacts, error) {
	f := jobs.AlertFacts{Now: now, Failures: map[int64][]jobs.TypeRuns{}, ServedQueues: map[string]bool{}}
	var waiting, workers bool
	minGrace := -1
	for _, r := range rules {
		switch r.Kind {
		case jobs.AlertFailureRate:
			runs, err := failureRuns(ctx, tx, r.WindowMinutes(), r.Type)
			if err != nil {
				return f, err
			}
			f.Failures[r.ID] = runs
		case jobs.AlertQueueLatency:
			waiting = true
		case jobs.AlertNoWorker:
			waiting, workers = true, true
		case jobs.AlertCronOverdue:
			if minGrace < 0 || r.GraceSeconds < minGrace {
				minGrace = r.GraceSeconds
			}
		}
	}
	var err error
	if waiting {
		if f.Waiting, err = collectTx(ctx, tx, pgx.RowToStructByPos[jobs.QueueWaiting], waitingSQL); err != nil {
			return f, err
		}
	}
	if workers {
		served, err := collectTx(ctx, tx, pgx.RowTo[[]string], servedQueuesSQL, float64(liveWorkerTTL.Milliseconds()))
		if err != nil {
			return f, err
		}
		for _, qs := range served {
			f.AllQueues = f.AllQueues || len(qs) == 0
			for _, q := range qs {
				f.ServedQueues[q] = true
			}
		}
	}
	if minGrace >= 0 {
		if f.Overdue, err = collectTx(ctx, tx, pgx.RowToStructByPos[jobs.OverdueSeries], overdueSeriesSQL, minGrace); err != nil {
			return f, err
		}
	}
	return f, nil
}

func failureRuns(ctx context.Context, tx pgx.Tx, minutes int, typ string) ([]jobs.TypeRuns, error) {
	return collectTx(ctx, tx, pgx.RowToStructByPos[jobs.TypeRuns], failureRunsSQL, minutes, typ)
}

// collectTx runs a query in tx and collects its rows with fn.
func collectTx[T any](ctx context.Context, tx pgx.Tx, fn pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, fn)
}
