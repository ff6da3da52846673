package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/logs"
)

const dlqCountSQL = `SELECT count(*) FROM (
	(SELECT 1 FROM jobs WHERE status = 'dead_letter' AND deleted_at IS NULL LIMIT $1)
	UNION ALL (SELECT 1 FROM job_history WHERE status = 'dead_letter' LIMIT $1)
	LIMIT $1) x`

const dlqRecentSQL = `
(SELECT id, type, coalesce(last_error, ''), attempt, coalesce(finished_at, updated_at) AS at
 FROM jobs WHERE status = 'dead_letter' AND deleted_at IS NULL
 ORDER BY finished_at DESC NULLS LAST LIMIT 10)
UNION ALL
(SELECT id, type, coalesce(last_error, ''), attempt, finished_at
 FROM job_history WHERE status = 'dead_letter'
 ORDER BY finished_at DESC LIMIT 10)
ORDER BY at DESC
LIMIT 10`

const alertTurnSQL = `
INSERT INTO loop_leases (name, last_run_at, holder) VALUES ('dlq_alert', '-infinity', '')
ON CONFLICT (name) DO NOTHING`

// lockAlertTurnSQL locks the DLQ alert's turn and reads when the last alert
// went out.
const lockAlertTurnSQL = `SELECT greatest(last_run_at, 'epoch'::timestamptz) FROM loop_leases WHERE name = 'dlq_alert' FOR UPDATE`

const queueAlertSQL = `INSERT INTO alert_outbox (recipients, subject, text_body, html_body) VALUES ($1, $2, $3, $4)`

const markAlertTurnSQL = `UPDATE loop_leases SET last_run_at = $1 WHERE name = 'dlq_alert'`

// ClaimDLQAlert decides, for the whole cluster, whether a DLQ alert is due:
// the DLQ holds at least threshold jobs, a job entered it since the last
// alert, and the last alert is older than cooldown. If so it stores the
// email that build returns in the outbox and starts a new cooldown window,
// all in one transaction, and returns true. Of several processes asking at
// once, exactly one gets true.
func (s *Store) ClaimDLQAlert(ctx context.Context, threshold int, cooldown time.Duration,
	build func(domain.DLQSnapshot) (domain.Email, error)) (bool, error) {
	queued := false
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, alertTurnSQL); err != nil {
			return err
		}
		var last time.Time
		if err := tx.QueryRow(ctx, lockAlertTurnSQL).Scan(&last); err != nil {
			return err
		}
		var now time.Time
		if err := tx.QueryRow(ctx, nowSQL).Scan(&now); err != nil {
			return err
		}
		if now.Sub(last) < cooldown {
			return nil
		}
		var snap domain.DLQSnapshot
		if err := tx.QueryRow(ctx, dlqCountSQL, 100_000).Scan(&snap.Count); err != nil {
			return err
		}
		if snap.Count < int64(threshold) {
			return nil
		}
		rows, err := tx.Query(ctx, dlqRecentSQL)
		if err != nil {
			return err
		}
		for rows.Next() {
			var d domain.DLQJob
			if err := rows.Scan(&d.ID, &d.Type, &d.Error, &d.Attempts, &d.FailedAt); err != nil {
				rows.Close()
				return err
			}
			d.Error = logs.Scrub(d.Error)
			snap.Recent = append(snap.Recent, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if len(snap.Recent) == 0 || !snap.Recent[0].FailedAt.After(last) {
			return nil // nothing entered the DLQ since the last alert
		}
		snap.Threshold = threshold
		email, err := build(snap)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, queueAlertSQL, email.To, email.Subject, email.Text, email.HTML); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, markAlertTurnSQL, now); err != nil {
			return err
		}
		queued = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("claim DLQ alert: %w", err)
	}
	return queued, nil
}

// nextAlertSQL locks the next outbox email due to be sent, skipping those
// another sender holds.
const nextAlertSQL = `
SELECT id, channel, recipients, subject, text_body, html_body, webhook_url, webhook_secret, attempts FROM alert_outbox
WHERE sent_at IS NULL AND failed_at IS NULL AND next_attempt_at <= now()
ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED`

// alertFailedSQL records a failed send: retried after $4 ms, or given up
// once the attempts reach $5.
const alertFailedSQL = `
UPDATE alert_outbox SET attempts = $2::integer, last_error = $3,
	next_attempt_at = now() + $4 * interval '1 millisecond',
	failed_at = CASE WHEN $2::integer >= $5::integer THEN now() END WHERE id = $1`

const alertSentSQL = `UPDATE alert_outbox SET sent_at = now(), attempts = attempts + 1, last_error = NULL WHERE id = $1`

// SendDueAlerts hands each due outbox notification (email or webhook) to send, one at a time with its
// row locked (SKIP LOCKED, so several senders share the work), and records
// the result: sent, retried later with backoff, or given up after
// maxAttempts.
func (s *Store) SendDueAlerts(ctx context.Context, maxAttempts int, send func(context.Context, domain.Notification) error) (sent int, err error) {
	for {
		var done bool
		err := s.withTx(ctx, func(tx pgx.Tx) error {
			var n domain.Notification
			var attempts int
			err := tx.QueryRow(ctx, nextAlertSQL).Scan(&n.ID, &n.Channel, &n.Email.To, &n.Email.Subject, &n.Email.Text,
				&n.Email.HTML, &n.WebhookURL, &n.WebhookSecret, &attempts)
			if errors.Is(err, pgx.ErrNoRows) {
				done = true
				return nil
			}
			if err != nil {
				return err
			}
			if serr := send(ctx, n); serr != nil {
				attempts++
				backoff := time.Duration(min(attempts*attempts, 60)) * time.Minute / 2
				_, err = tx.Exec(ctx, alertFailedSQL,
					n.ID, attempts, truncate(serr.Error(), 2000), float64(backoff.Milliseconds()), maxAttempts)
				done = true // try the rest later
				return err
			}
			_, err = tx.Exec(ctx, alertSentSQL, n.ID)
			sent++
			return err
		})
		if err != nil || done {
			return sent, err
		}
	}
}

const alertOutboxSQL = `
SELECT o.id, o.created_at, o.channel, o.alert_id, o.recipients, o.webhook_url, o.subject, o.attempts, o.sent_at, o.failed_at,
       coalesce(o.last_error, '') AS last_error, coalesce(r.name, '') AS rule_name, coalesce(a.subject, '') AS alert_subject
FROM alert_outbox o LEFT JOIN alerts a ON a.id = o.alert_id LEFT JOIN alert_rules r ON r.id = a.rule_id
ORDER BY o.id DESC LIMIT $1`

// alertDeliveriesSQL lists the notifications of the alerts $1, newest
// first, at most $2 per alert.
const alertDeliveriesSQL = `
SELECT id, created_at, channel, alert_id, recipients, webhook_url, subject, attempts, sent_at, failed_at,
       last_error, rule_name, alert_subject FROM (
	SELECT o.id, o.created_at, o.channel, o.alert_id, o.recipients, o.webhook_url, o.subject, o.attempts, o.sent_at, o.failed_at,
	       coalesce(o.last_error, '') AS last_error, '' AS rule_name, '' AS alert_subject,
	       row_number() OVER (PARTITION BY o.alert_id ORDER BY o.id DESC) AS n
	FROM alert_outbox o WHERE o.alert_id = ANY($1::bigint[])
) d WHERE n <= $2 ORDER BY id DESC`

// alertRow is an alert_outbox row as the listing shows it.
type alertRow struct {
	ID         int64      `db:"id"`
	CreatedAt  time.Time  `db:"created_at"`
	Channel    string     `db:"channel"`
	AlertID    *int64     `db:"alert_id"`
	Recipients textArray  `db:"recipients"`
	WebhookURL string     `db:"webhook_url"`
	Subject    string     `db:"subject"`
	Attempts   int        `db:"attempts"`
	SentAt     *time.Time `db:"sent_at"`
	FailedAt   *time.Time `db:"failed_at"`
	LastError  string     `db:"last_error"`
	RuleName   string     `db:"rule_name"`
	Subject2   string     `db:"alert_subject"`
}

func (r alertRow) record() domain.AlertRecord {
	return domain.AlertRecord{ID: r.ID, CreatedAt: r.CreatedAt, Channel: r.Channel, AlertID: r.AlertID,
		Recipients: r.Recipients, WebhookURL: r.WebhookURL, Subject: r.Subject,
		Attempts: r.Attempts, SentAt: r.SentAt, FailedAt: r.FailedAt, LastError: r.LastError,
		RuleName: r.RuleName, AlertSubject: r.Subject2}
}

// AlertOutbox lists the latest notifications, newest first: what went out,
// what waits for a retry and what was given up.
func (s *Store) AlertOutbox(ctx context.Context, limit int) ([]domain.AlertRecord, error) {
	var rows []alertRow
	if err := s.sqlx.SelectContext(ctx, &rows, alertOutboxSQL, limit); err != nil {
		return nil, fmt.Errorf("list alerts: %w", err)
	}
	var out []domain.AlertRecord
	for _, r := range rows {
		out = append(out, r.record())
	}
	return out, nil
}

// AlertDeliveries returns the notifications of the given alerts, newest
// first, up to perAlert of each: where each firing, repeat and resolution
// went and how its delivery went.
func (s *Store) AlertDeliveries(ctx context.Context, alertIDs []int64, perAlert int) (map[int64][]domain.AlertRecord, error) {
	out := map[int64][]domain.AlertRecord{}
	if len(alertIDs) == 0 {
		return out, nil
	}
	var rows []alertRow
	if err := s.sqlx.SelectContext(ctx, &rows, alertDeliveriesSQL, alertIDs, perAlert); err != nil {
		return nil, fmt.Errorf("list alert deliveries: %w", err)
	}
	for _, r := range rows {
		out[*r.AlertID] = append(out[*r.AlertID], r.record())
	}
	return out, nil
}
