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

// Push queues: their settings live in the queues row (UpdateQueue sets
// and removes them with the other settings); what is here is what the
// pusher reads and writes as it delivers, and the secrets' rotation.

const pushQueuesSQL = `
SELECT name, push_url, push_timeout_seconds, push_secret, push_prev_secret,
       paused OR push_paused_at IS NOT NULL, CASE WHEN push_hold_until > now() THEN push_hold_until END
FROM queues WHERE push_url IS NOT NULL ORDER BY name`

// PushQueues returns every queue that pushes its jobs.
func (s *Store) PushQueues(ctx context.Context) ([]domain.PushQueue, error) {
	rows, err := s.pool.Query(ctx, pushQueuesSQL)
	if err != nil {
		return nil, fmt.Errorf("read push queues: %w", err)
	}
	defer rows.Close()
	var out []domain.PushQueue
	for rows.Next() {
		var q domain.PushQueue
		var timeout int32
		var secret string
		var prev *string
		if err := rows.Scan(&q.Name, &q.URL, &timeout, &secret, &prev, &q.Paused, &q.HeldUntil); err != nil {
			return nil, fmt.Errorf("read push queues: %w", err)
		}
		q.Timeout = time.Duration(timeout) * time.Second
		q.Secrets = []string{secret}
		if prev != nil {
			q.Secrets = append(q.Secrets, *prev)
		}
		out = append(out, q)
	}
	return out, rows.Err()
}

// holdPushSQL holds a queue's pushes back until $2 (never shortening a
// longer hold) and tells every process, without touching the settings'
// version: no claim is wrong for not knowing of it.
const holdPushSQL = `
WITH held AS (
	UPDATE queues SET push_hold_until = greatest(coalesce(push_hold_until, $2), $2)
	WHERE name = $1 AND push_url IS NOT NULL RETURNING name
)
SELECT count(pg_notify('` + ChannelQueues + `', name)) FROM held`

// HoldPush holds the pushes of queue back until until: its endpoint
// answered 429 or 503.
func (s *Store) HoldPush(ctx context.Context, queue string, until time.Time) error {
	if _, err := s.pool.Exec(ctx, holdPushSQL, queue, until); err != nil {
		return fmt.Errorf("hold push of %s: %w", queue, err)
	}
	return nil
}

const pausePushSQL = `
WITH paused AS (
	UPDATE queues SET push_paused_at = coalesce(push_paused_at, now()), push_paused_reason = $2
	WHERE name = $1 AND push_url IS NOT NULL RETURNING name
)
SELECT count(pg_notify('` + ChannelQueues + `', name)) FROM paused`

// PausePush stops pushing the jobs of queue until an operator sets its
// push again: its endpoint answered 410 Gone.
func (s *Store) PausePush(ctx context.Context, queue, reason string) error {
	if _, err := s.pool.Exec(ctx, pausePushSQL, queue, truncate(reason, 500)); err != nil {
		return fmt.Errorf("pause push of %s: %w", queue, err)
	}
	return nil
}

const rotatePushSecretSQL = `
UPDATE queues SET push_prev_secret = push_secret, push_secret = $2, updated_at = now(), updated_by = $3
WHERE name = $1 AND push_url IS NOT NULL AND push_prev_secret IS NULL
RETURNING name`

const pushSecretStateSQL = `SELECT push_url IS NOT NULL, push_prev_secret IS NOT NULL FROM queues WHERE name = $1`

// RotatePushSecret makes a new signing secret for queue's pushes and
// returns it; the one it replaces goes on signing (both signatures are
// sent) until RevokePushSecret. A queue whose replaced secret still signs
// is domain.ErrPreviousSecret: revoke it first.
func (s *Store) RotatePushSecret(ctx context.Context, queue, by string) (string, error) {
	secret := domain.NewWebhookSecret()
	var name string
	err := s.pool.QueryRow(ctx, rotatePushSecretSQL, queue, secret, by).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", s.pushSecretState(ctx, queue, domain.ErrPreviousSecret)
	}
	if err != nil {
		return "", fmt.Errorf("rotate the push secret of %s: %w", queue, err)
	}
	s.notifyQueue(ctx, queue)
	return secret, nil
}

const revokePushSecretSQL = `
UPDATE queues SET push_prev_secret = NULL, updated_at = now(), updated_by = $2
WHERE name = $1 AND push_url IS NOT NULL AND push_prev_secret IS NOT NULL
RETURNING name`

// RevokePushSecret stops signing with the secret the last rotation
// replaced.
func (s *Store) RevokePushSecret(ctx context.Context, queue, by string) error {
	var name string
	err := s.pool.QueryRow(ctx, revokePushSecretSQL, queue, by).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return s.pushSecretState(ctx, queue, domain.ErrNoPreviousSecret)
	}
	if err != nil {
		return fmt.Errorf("revoke the push secret of %s: %w", queue, err)
	}
	s.notifyQueue(ctx, queue)
	return nil
}

// pushSecretState explains why a rotation or revocation changed nothing:
// no such push queue, or otherwise.
func (s *Store) pushSecretState(ctx context.Context, queue string, otherwise error) error {
	var pushed, prev bool
	err := s.pool.QueryRow(ctx, pushSecretStateSQL, queue).Scan(&pushed, &prev)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && !pushed):
		return domain.ErrNoPush
	case err != nil:
		return err
	}
	return otherwise
}

const notifyQueueSQL = `SELECT pg_notify('` + ChannelQueues + `', $1)`

// notifyQueue tells every process that queue's settings changed.
func (s *Store) notifyQueue(ctx context.Context, queue string) {
	_, _ = s.pool.Exec(ctx, notifyQueueSQL, queue)
}

// recordPushSQL stores deliveries and forgets those of the same queues
// older than a day.
const recordPushSQL = `
WITH gone AS (
	DELETE FROM push_deliveries WHERE queue = ANY($1::text[]) AND at < now() - interval '1 day'
)
INSERT INTO push_deliveries (queue, at, job_id, attempt, status_code, outcome, error, duration_ms)
SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::uuid[], $4::integer[], $5::integer[], $6::text[], $7::text[], $8::bigint[])`

// RecordPushDeliveries stores what the pusher saw, in one statement.
func (s *Store) RecordPushDeliveries(ctx context.Context, ds []domain.PushDelivery) error {
	if len(ds) == 0 {
		return nil
	}
	n := len(ds)
	queues, ats, ids := make([]string, n), make([]time.Time, n), make([]uuid.UUID, n)
	attempts, codes := make([]int32, n), make([]int32, n)
	outcomes, errs, durs := make([]string, n), make([]*string, n), make([]int64, n)
	for i, d := range ds {
		queues[i], ats[i], ids[i], attempts[i], codes[i] = d.Queue, d.At, d.JobID, int32(d.Attempt), int32(d.StatusCode)
		outcomes[i], durs[i] = d.Outcome, d.DurationMS
		if d.Error != "" {
			e := truncate(d.Error, 1000)
			errs[i] = &e
		}
	}
	if _, err := s.pool.Exec(ctx, recordPushSQL, queues, ats, ids, attempts, codes, outcomes, errs, durs); err != nil {
		return fmt.Errorf("record push deliveries: %w", err)
	}
	return nil
}

const pushDeliveriesSQL = `
SELECT queue, job_id, attempt, at, status_code, outcome, coalesce(error, ''), duration_ms FROM push_deliveries
WHERE queue = $1 ORDER BY at DESC LIMIT $2`

// PushDeliveries returns the latest deliveries of queue, newest first.
func (s *Store) PushDeliveries(ctx context.Context, queue string, limit int) ([]domain.PushDelivery, error) {
	rows, err := s.pool.Query(ctx, pushDeliveriesSQL, queue, limit)
	if err != nil {
		return nil, fmt.Errorf("read push deliveries: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (domain.PushDelivery, error) {
		var d domain.PushDelivery
		err := r.Scan(&d.Queue, &d.JobID, &d.Attempt, &d.At, &d.StatusCode, &d.Outcome, &d.Error, &d.DurationMS)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read push deliveries: %w", err)
	}
	return out, nil
}
