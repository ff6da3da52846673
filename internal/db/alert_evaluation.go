package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
)

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

// suspendedSQL summarises, per queue, the jobs that sleep or wait for a
// signal or an event, with when the longest-waiting one began to wait
// (its row last changed then), through the waiting jobs' index.
const suspendedSQL = `
SELECT queue, count(*), min(updated_at) FROM jobs
WHERE status = 'waiting' AND deleted_at IS NULL
GROUP BY queue`

// servedQueuesSQL reads the queues of the live entries that run jobs (an
// API or scheduler process has no slots).
const servedQueuesSQL = `SELECT queues FROM workers WHERE heartbeat_at > now() - $1 * interval '1 millisecond' AND concurrency > 0`

const overdueSeriesSQL = `
SELECT id, type, next_run_at, coalesce(cron, interval_seconds || ' s')
FROM job_schedules
WHERE NOT paused AND next_run_at < now() - $1 * interval '1 second'
ORDER BY next_run_at
LIMIT 1000`

const openAlertsSQL = `
SELECT id, rule_id, subject, last_notified_at, fired_at, notifications FROM alerts WHERE resolved_at IS NULL`

const fireAlertSQL = `
INSERT INTO alerts (rule_id, subject, value, message, fired_at, last_notified_at, notifications) VALUES ($1, $2, $3, $4, $5, $5, 0)
RETURNING id`

// refreshAlertSQL updates an open alert's finding; $4 says its cooldown
// has passed, so it is notified again now (counted by countNotifiedSQL
// once a notification is queued: a rule that reaches nobody notifies
// nobody, and its count stays 0).
const refreshAlertSQL = `
UPDATE alerts SET value = $2, message = $3,
	last_notified_at = CASE WHEN $4 THEN $5 ELSE last_notified_at END
WHERE id = $1`

const countNotifiedSQL = `UPDATE alerts SET notifications = notifications + 1 WHERE id = $1`

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
// and none is sent twice; an error from render rolls the whole turn back.
// It returns whether this call evaluated and how many notifications it
// queued.
func (s *Store) EvaluateAlertRules(ctx context.Context, interval time.Duration,
	render func(domain.AlertNotice) ([]domain.Notification, error)) (evaluated bool, queued int, err error) {
	rules, err := s.selectAlertRules(ctx, listEnabledAlertRulesSQL)
	if err != nil {
		return false, 0, err
	}
	err = s.withTx(ctx, func(tx pgx.Tx) error {
		evaluated, queued = false, 0
		now, due, err := takeRulesTurn(ctx, tx, interval)
		if err != nil || !due {
			return err
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
		e := &alertEvaluation{tx: tx, now: now, open: open, render: render}
		for _, r := range rules {
			if err := e.evaluate(ctx, r, r.Evaluate(&facts)); err != nil {
				return err
			}
		}
		queued = e.queued
		_, err = tx.Exec(ctx, markRulesTurnSQL, now)
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("evaluate alert rules: %w", err)
	}
	return evaluated, queued, nil
}

// takeRulesTurn locks the evaluation's turn until tx ends and reports the
// database's time and whether interval has passed since the last turn.
func takeRulesTurn(ctx context.Context, tx pgx.Tx, interval time.Duration) (now time.Time, due bool, err error) {
	if _, err := tx.Exec(ctx, rulesTurnSQL); err != nil {
		return now, false, err
	}
	var last time.Time
	if err := tx.QueryRow(ctx, lockRulesTurnSQL).Scan(&last); err != nil {
		return now, false, err
	}
	if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
		return now, false, err
	}
	return now, now.Sub(last) >= interval, nil
}

// alertEvaluation is one turn of the rules' evaluation inside its
// transaction: the alerts open when it began, and the notifications it
// has queued so far.
type alertEvaluation struct {
	tx     pgx.Tx
	now    time.Time
	open   map[openKey]openAlert
	render func(domain.AlertNotice) ([]domain.Notification, error)
	queued int
}

// evaluate brings rule r's alerts in line with its findings: each finding
// fires a new alert or refreshes the open one, and each open alert of r
// without a finding resolves.
func (e *alertEvaluation) evaluate(ctx context.Context, r domain.AlertRule, findings []domain.AlertFinding) error {
	holds := map[string]bool{}
	for _, f := range findings {
		holds[f.Subject] = true
		if err := e.hold(ctx, r, f); err != nil {
			return err
		}
	}
	for k, o := range e.open {
		if k.rule != r.ID || holds[k.subject] {
			continue
		}
		if err := e.resolve(ctx, r, o); err != nil {
			return err
		}
	}
	return nil
}

// hold records that finding f of rule r holds: it refreshes the open
// alert, notifying again once the rule's cooldown has passed, or fires a
// new one.
func (e *alertEvaluation) hold(ctx context.Context, r domain.AlertRule, f domain.AlertFinding) error {
	now := e.now
	a := domain.Alert{RuleID: r.ID, RuleName: r.Name, Kind: r.Kind, Subject: f.Subject, Value: f.Value,
		Message: f.Message, FiredAt: now, LastNotifiedAt: now, Notifications: 1}
	if o, ok := e.open[openKey{r.ID, f.Subject}]; ok {
		repeat := now.Sub(o.lastNotified) >= time.Duration(r.CooldownSeconds)*time.Second
		if _, err := e.tx.Exec(ctx, refreshAlertSQL, o.id, f.Value, f.Message, repeat, now); err != nil {
			return err
		}
		if !repeat {
			return nil
		}
		a.ID, a.FiredAt, a.Notifications = o.id, o.firedAt, o.notifications+1
		return e.notify(ctx, domain.AlertNotice{Event: domain.AlertRepeat, Rule: r, Alert: a})
	}
	if err := e.tx.QueryRow(ctx, fireAlertSQL, r.ID, f.Subject, f.Value, f.Message, now).Scan(&a.ID); err != nil {
		return err
	}
	return e.notify(ctx, domain.AlertNotice{Event: domain.AlertFiring, Rule: r, Alert: a})
}

// resolve closes rule r's open alert o, whose condition no longer holds,
// and notifies that.
func (e *alertEvaluation) resolve(ctx context.Context, r domain.AlertRule, o openAlert) error {
	if _, err := e.tx.Exec(ctx, resolveAlertSQL, o.id, e.now); err != nil {
		return err
	}
	resolved := e.now
	a := domain.Alert{ID: o.id, RuleID: r.ID, RuleName: r.Name, Kind: r.Kind, Subject: o.subject, FiredAt: o.firedAt,
		LastNotifiedAt: o.lastNotified, Notifications: o.notifications, ResolvedAt: &resolved,
		Message: fmt.Sprintf("resolved: %s no longer holds for %s", r.Describe(), o.subject)}
	return e.notify(ctx, domain.AlertNotice{Event: domain.AlertResolved, Rule: r, Alert: a})
}

// notify renders n and queues its notifications in the outbox; a firing
// or repeat that queued any counts as one more time the alert notified.
func (e *alertEvaluation) notify(ctx context.Context, n domain.AlertNotice) error {
	msgs, err := e.render(n)
	if err != nil {
		return err
	}
	if len(msgs) > 0 && n.Event != domain.AlertResolved {
		if _, err := e.tx.Exec(ctx, countNotifiedSQL, n.Alert.ID); err != nil {
			return err
		}
	}
	for _, m := range msgs {
		if _, err := e.tx.Exec(ctx, queueNotificationSQL, m.Channel, m.Email.To, m.Email.Subject, m.Email.Text,
			m.Email.HTML, m.WebhookURL, m.WebhookSecret, n.Alert.ID); err != nil {
			return err
		}
		e.queued++
	}
	return nil
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
func alertFacts(ctx context.Context, tx pgx.Tx, rules []domain.AlertRule, now time.Time) (domain.AlertFacts, error) {
	f := domain.AlertFacts{Now: now, Failures: map[int64][]domain.TypeRuns{}, ServedQueues: map[string]bool{}}
	var waiting, workers, suspended bool
	minGrace := -1
	for _, r := range rules {
		switch r.Kind {
		case domain.AlertFailureRate:
			runs, err := failureRuns(ctx, tx, r.WindowMinutes(), r.Type)
			if err != nil {
				return f, err
			}
			f.Failures[r.ID] = runs
		case domain.AlertQueueLatency:
			waiting = true
		case domain.AlertJobWaiting:
			suspended = true
		case domain.AlertNoWorker:
			waiting, workers = true, true
		case domain.AlertCronOverdue:
			if minGrace < 0 || r.GraceSeconds < minGrace {
				minGrace = r.GraceSeconds
			}
		}
	}
	var err error
	if waiting {
		if f.Waiting, err = collectTx(ctx, tx, pgx.RowToStructByPos[domain.QueueWaiting], waitingSQL); err != nil {
			return f, err
		}
	}
	if suspended {
		if f.Suspended, err = collectTx(ctx, tx, pgx.RowToStructByPos[domain.QueueWaiting], suspendedSQL); err != nil {
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
		if f.Overdue, err = collectTx(ctx, tx, pgx.RowToStructByPos[domain.OverdueSeries], overdueSeriesSQL, minGrace); err != nil {
			return f, err
		}
	}
	return f, nil
}

func failureRuns(ctx context.Context, tx pgx.Tx, minutes int, typ string) ([]domain.TypeRuns, error) {
	return collectTx(ctx, tx, pgx.RowToStructByPos[domain.TypeRuns], failureRunsSQL, minutes, typ)
}

// collectTx runs a query in tx and collects its rows with fn.
func collectTx[T any](ctx context.Context, tx pgx.Tx, fn pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, fn)
}
