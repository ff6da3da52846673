package db

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
)

// ChannelQueues carries a queue name whenever an operator changes a
// queue's settings (pause, resume, limits): every process reloads them.
const ChannelQueues = "flint_queues"

// flowReload is how old the loaded queue settings may grow before a claim
// reloads them, in case a notification was lost.
const flowReload = 5 * time.Second

// flowState is the queue settings one process has loaded, and the version
// of flow_control_version they belong to. Every claim sends the version:
// if an operator changed anything since, the claim takes nothing and the
// process reloads (the notification or the next reload does), so a stale
// copy can delay claims by moments but never break a limit or a pause.
type flowState struct {
	version  int64
	loadedAt time.Time
	queues   map[string]domain.QueueSettings
	// constrained lists the paused, limited or pushed queues, sorted (the
	// order in which claims take their locks, so claimers never
	// deadlock): workers never take the jobs of a pushed queue.
	constrained []string
	// pushConstrained lists the pushed queues that are paused or limited:
	// the pusher's constrained queues.
	pushConstrained []string
}

// constrainedFor returns the constrained queues a claim of queues (nil:
// all) serves; push says the claim is the pusher's.
func (f *flowState) constrainedFor(queues []string, push bool) []string {
	list := f.constrained
	if push {
		list = f.pushConstrained
	}
	if len(queues) == 0 {
		return list
	}
	var out []string
	for _, q := range list {
		if slices.Contains(queues, q) {
			out = append(out, q)
		}
	}
	return out
}

// PushedQueue reports whether queue pushes its jobs to an endpoint, as
// of the settings last loaded.
func (s *Store) PushedQueue(queue string) bool {
	st := s.flow.Load()
	if st == nil {
		return false
	}
	q, ok := st.queues[queue]
	return ok && q.Push != nil
}

const queueColumns = `name, paused, concurrency, rate_limit, rate_period_seconds, per_key_concurrency, updated_at, updated_by,
	push_url, push_timeout_seconds, (push_secret IS NOT NULL)::int + (push_prev_secret IS NOT NULL)::int,
	push_paused_at, push_paused_reason, push_hold_until`

type queueRow struct {
	Name              string
	Paused            bool
	Concurrency       *int32
	RateLimit         *int32
	RatePeriod        *int32
	PerKeyConcurrency *int32
	UpdatedAt         time.Time
	UpdatedBy         string
	PushURL           *string
	PushTimeout       *int32
	PushSecrets       int32
	PushPausedAt      *time.Time
	PushPausedReason  *string
	PushHoldUntil     *time.Time
}

// fields are the scan targets of queueColumns, in order.
func (r *queueRow) fields() []any {
	return []any{&r.Name, &r.Paused, &r.Concurrency, &r.RateLimit, &r.RatePeriod, &r.PerKeyConcurrency, &r.UpdatedAt, &r.UpdatedBy,
		&r.PushURL, &r.PushTimeout, &r.PushSecrets, &r.PushPausedAt, &r.PushPausedReason, &r.PushHoldUntil}
}

func (r *queueRow) settings() domain.QueueSettings {
	q := domain.QueueSettings{Name: r.Name, Paused: r.Paused, UpdatedAt: r.UpdatedAt, UpdatedBy: r.UpdatedBy}
	if r.PushURL != nil {
		t := &domain.PushTarget{URL: *r.PushURL, Secrets: int(r.PushSecrets), PausedAt: r.PushPausedAt, HeldUntil: r.PushHoldUntil}
		if r.PushTimeout != nil {
			t.TimeoutSeconds = int(*r.PushTimeout)
		}
		if r.PushPausedReason != nil {
			t.PausedReason = *r.PushPausedReason
		}
		q.Push = t
	}
	if r.Concurrency != nil {
		n := int(*r.Concurrency)
		q.Concurrency = &n
	}
	if r.RateLimit != nil && r.RatePeriod != nil {
		q.RateLimit = &domain.RateLimit{Limit: int(*r.RateLimit), PeriodSeconds: int(*r.RatePeriod)}
	}
	if r.PerKeyConcurrency != nil {
		n := int(*r.PerKeyConcurrency)
		q.PerKeyConcurrency = &n
	}
	return q
}

const loadFlowSQL = `
SELECT v.version, q.` + queueColumns + `
FROM flow_control_version v LEFT JOIN queues q ON true`

// ReloadQueueSettings reads every queue's settings and the version they
// belong to (one statement, one snapshot).
func (s *Store) ReloadQueueSettings(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, loadFlowSQL)
	if err != nil {
		return fmt.Errorf("load queue settings: %w", err)
	}
	defer rows.Close()
	st := &flowState{queues: map[string]domain.QueueSettings{}, loadedAt: time.Now()}
	for rows.Next() {
		var r queueRow
		var name *string
		var paused *bool
		var at *time.Time
		var by *string
		var secrets *int32
		if err := rows.Scan(&st.version, &name, &paused, &r.Concurrency, &r.RateLimit, &r.RatePeriod,
			&r.PerKeyConcurrency, &at, &by, &r.PushURL, &r.PushTimeout, &secrets, &r.PushPausedAt, &r.PushPausedReason,
			&r.PushHoldUntil); err != nil {
			return fmt.Errorf("load queue settings: %w", err)
		}
		if name == nil {
			continue
		}
		r.Name, r.Paused, r.UpdatedAt, r.UpdatedBy = *name, *paused, *at, *by
		if secrets != nil {
			r.PushSecrets = *secrets
		}
		q := r.settings()
		st.queues[q.Name] = q
		if q.Constrained() {
			st.constrained = append(st.constrained, q.Name)
		}
		if q.Push != nil && (q.Paused || q.Limited()) {
			st.pushConstrained = append(st.pushConstrained, q.Name)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("load queue settings: %w", err)
	}
	sort.Strings(st.constrained)
	sort.Strings(st.pushConstrained)
	// Keep the newest: a slow reload must not replace a fresher one.
	for {
		cur := s.flow.Load()
		if cur != nil && cur.version > st.version {
			return nil
		}
		if s.flow.CompareAndSwap(cur, st) {
			return nil
		}
	}
}

// flowFor returns the loaded queue settings, loading them when there are
// none yet or they are older than flowReload.
func (s *Store) flowFor(ctx context.Context) (*flowState, error) {
	st := s.flow.Load()
	if st != nil && time.Since(st.loadedAt) < flowReload {
		return st, nil
	}
	if err := s.ReloadQueueSettings(ctx); err != nil {
		if st != nil {
			return st, nil // the version guard keeps a stale copy safe
		}
		return nil, err
	}
	return s.flow.Load(), nil
}

// QueuePaused reports whether workers leave queue alone as of the
// settings last loaded: it is paused, or pushes its jobs to an endpoint.
// The pool ignores wake-ups for such queues.
func (s *Store) QueuePaused(queue string) bool {
	st := s.flow.Load()
	if st == nil {
		return false
	}
	q, ok := st.queues[queue]
	return ok && (q.Paused || q.Push != nil)
}

// lockQueueSQL takes the advisory locks of queues, in the order given,
// until the transaction ends: claims of a limited queue and changes to its
// settings take turns. The key is (7283948, hashtext(name)); two names
// that hash alike share a lock, which only makes them take turns too.
const lockQueueSQL = `SELECT ` + queueLocks

// queueLocks is the select list and source taking the locks of the queues
// named in $1 (see lockQueueSQL); the claim's lock statements start with it
// too.
const queueLocks = `count(pg_advisory_xact_lock(7283948, hashtext(name))) FROM unnest($1::text[]) AS q(name)`

// upsertQueueSQL writes a queue's settings and bumps the version, and
// tells every process. A new or changed rate limit starts with a full
// bucket (its burst); an unchanged one keeps its tokens.
const upsertQueueSQL = `
WITH up AS (
	INSERT INTO queues (name, paused, concurrency, rate_limit, rate_period_seconds, per_key_concurrency,
	                    tokens, tokens_at, updated_at, updated_by,
	                    push_url, push_timeout_seconds, push_secret, push_paused_at, push_paused_reason, push_hold_until)
	VALUES ($1, $2, $3, $4, $5, $6, greatest(1, coalesce($4, 0) / 5.0), now(), now(), $7, $8, $9,
	        -- the row to insert must hold the secret it keeps: its checks come before the conflict
	        CASE WHEN $8::text IS NOT NULL THEN coalesce($10, (SELECT push_secret FROM queues WHERE name = $1)) END,
	        $11, $12, $13)
	ON CONFLICT (name) DO UPDATE SET
		paused = excluded.paused, concurrency = excluded.concurrency,
		push_url = excluded.push_url, push_timeout_seconds = excluded.push_timeout_seconds,
		push_secret = CASE WHEN excluded.push_url IS NULL THEN NULL ELSE coalesce(excluded.push_secret, queues.push_secret) END,
		push_prev_secret = CASE WHEN excluded.push_url IS NULL THEN NULL ELSE queues.push_prev_secret END,
		push_paused_at = excluded.push_paused_at, push_paused_reason = excluded.push_paused_reason,
		push_hold_until = excluded.push_hold_until,
		rate_limit = excluded.rate_limit, rate_period_seconds = excluded.rate_period_seconds,
		per_key_concurrency = excluded.per_key_concurrency,
		tokens = CASE WHEN queues.rate_limit IS NOT DISTINCT FROM excluded.rate_limit
		               AND queues.rate_period_seconds IS NOT DISTINCT FROM excluded.rate_period_seconds
		              THEN queues.tokens ELSE excluded.tokens END,
		tokens_at = CASE WHEN queues.rate_limit IS NOT DISTINCT FROM excluded.rate_limit
		                  AND queues.rate_period_seconds IS NOT DISTINCT FROM excluded.rate_period_seconds
		                 THEN queues.tokens_at ELSE excluded.tokens_at END,
		updated_at = now(), updated_by = excluded.updated_by
	RETURNING ` + queueColumns + `
),
bumped AS (UPDATE flow_control_version SET version = version + 1 RETURNING version),
notified AS (SELECT pg_notify('` + ChannelQueues + `', $1) AS n)
SELECT up.*, bumped.version FROM up, bumped, notified`

const getQueueRowSQL = `SELECT ` + queueColumns + ` FROM queues WHERE name = $1`

// UpdateQueue applies change to the settings of queue (creating its row on
// the first change) under the queue's lock, so it never races a claim, and
// returns the new settings. Every process learns of it at once
// (ChannelQueues), and claims made with the old settings after it commits
// take nothing (the version guard).
func (s *Store) UpdateQueue(ctx context.Context, queue, by string, change func(domain.QueueSettings) domain.QueueSettings) (domain.QueueSettings, error) {
	var out domain.QueueSettings
	var version int64
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, lockQueueSQL, []string{queue}); err != nil {
			return err
		}
		cur := domain.QueueSettings{Name: queue}
		var r queueRow
		err := tx.QueryRow(ctx, getQueueRowSQL, queue).Scan(r.fields()...)
		switch {
		case err == nil:
			cur = r.settings()
		case !errors.Is(err, pgx.ErrNoRows):
			return err
		}
		next := change(cur)
		var conc, rate, period, perKey *int32
		if next.Concurrency != nil {
			conc = ptr(int32(*next.Concurrency))
		}
		if next.RateLimit != nil {
			rate, period = ptr(int32(next.RateLimit.Limit)), ptr(int32(next.RateLimit.PeriodSeconds))
		}
		if next.PerKeyConcurrency != nil {
			perKey = ptr(int32(*next.PerKeyConcurrency))
		}
		var pushURL, secret, pausedReason *string
		var pushTimeout *int32
		var pausedAt, holdUntil *time.Time
		if next.Push != nil {
			pushURL, pushTimeout = &next.Push.URL, ptr(int32(next.Push.TimeoutSeconds))
			pausedAt, holdUntil = next.Push.PausedAt, next.Push.HeldUntil
			if next.Push.PausedReason != "" {
				pausedReason = &next.Push.PausedReason
			}
			if cur.Push == nil {
				secret = ptr(domain.NewWebhookSecret()) // shown once, in the answer
			}
		}
		var w queueRow
		if err := tx.QueryRow(ctx, upsertQueueSQL, queue, next.Paused, conc, rate, period, perKey, by,
			pushURL, pushTimeout, secret, pausedAt, pausedReason, holdUntil).Scan(append(w.fields(), &version)...); err != nil {
			return err
		}
		out = w.settings()
		if secret != nil && out.Push != nil {
			out.Push.Secret = *secret
		}
		return nil
	})
	if err != nil {
		return out, fmt.Errorf("update queue %s: %w", queue, err)
	}
	// This process knows at once; the others reload on the notification.
	_ = s.ReloadQueueSettings(ctx)
	return out, nil
}

func ptr[T any](v T) *T { return &v }
