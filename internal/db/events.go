package db

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// ChannelEvents carries job events (a JSON array) in PostgreSQL-only mode,
// or when Redis is down.
const ChannelEvents = "flint_events"

// EventBus publishes job events after their changes commit, through Redis
// pub/sub when Redis is healthy and through PostgreSQL NOTIFY otherwise, and
// delivers the events every process publishes to this process's
// subscribers (the SSE broker). With the ready queue on, it also keeps the
// Redis ready queue in step with the events: queued jobs in, others out.
//
// Publish never blocks: events go through a buffer, and when it is full
// they are dropped and counted. Delivery is at most once by design;
// subscribers resynchronise from the API.
type EventBus struct {
	pool       DBTX
	redis      *Redis // nil in PostgreSQL-only mode
	readyQueue bool
	logger     *slog.Logger
	in         chan []domain.Event
	deliver    func([]domain.Event)
	dropped    atomic.Uint64
	published  atomic.Uint64
	// origin tags what this process sends, so that it skips its own
	// events when they come back (it delivers them as it sends them).
	origin string
}

// NewEventBus returns a bus; deliver receives every event any process
// publishes (it must not block).
func NewEventBus(store *Store, r *Redis, readyQueue bool, logger *slog.Logger, deliver func([]domain.Event)) *EventBus {
	return &EventBus{
		pool:       store.pool,
		redis:      r,
		readyQueue: readyQueue && r != nil,
		logger:     logger.With("component", "events"),
		in:         make(chan []domain.Event, 4096),
		deliver:    deliver,
		origin:     newOrigin(),
	}
}

// newOrigin is a process's tag on the events it sends.
func newOrigin() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// Publish queues events for publication.
func (b *EventBus) Publish(events []domain.Event) {
	select {
	case b.in <- events:
	default:
		b.dropped.Add(uint64(len(events)))
	}
}

// Dropped returns how many events were dropped because the publisher
// could not keep up.
func (b *EventBus) Dropped() uint64 { return b.dropped.Load() }

// Published returns how many events went out.
func (b *EventBus) Published() uint64 { return b.published.Load() }

// Rescored updates the ready queue after aging changed priorities; there
// is nothing to do without one.
func (b *EventBus) Rescored(moved []domain.Moved) {
	if len(moved) == 0 || !b.readyQueue {
		return
	}
	b.Publish(domain.EventsFromMoved(moved, time.Time{}))
}

// Run publishes queued events until ctx is done, batching what has
// accumulated while the previous batch was sent.
func (b *EventBus) Run(ctx context.Context) error {
	for {
		var batch []domain.Event
		select {
		case <-ctx.Done():
			// Send what is still waiting, then stop.
			for {
				select {
				case evs := <-b.in:
					batch = append(batch, evs...)
				default:
					if len(batch) > 0 {
						b.send(ctx, batch)
					}
					return nil
				}
			}
		case evs := <-b.in:
			batch = append(batch, evs...)
		}
		if !b.redis.Healthy() {
			// Over PostgreSQL each batch costs a commit: gather for a
			// moment so that a busy system sends few, large batches.
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	fill:
		for len(batch) < 5000 {
			select {
			case evs := <-b.in:
				batch = append(batch, evs...)
			default:
				break fill
			}
		}
		b.send(ctx, batch)
	}
}

// send publishes one batch; aging re-scores (zero At) only touch the ready
// queue.
func (b *EventBus) send(ctx context.Context, batch []domain.Event) {
	announce := batch // usually every event is a change: no copy
	if slices.ContainsFunc(batch, reScore) {
		announce = slices.DeleteFunc(slices.Clone(batch), reScore)
	}
	if b.deliver != nil && len(announce) > 0 {
		b.deliver(announce)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if b.redis.Healthy() {
		if err := b.sendRedis(sctx, batch, announce); err == nil {
			b.published.Add(uint64(len(announce)))
			return
		} else {
			b.redis.MarkDown(err)
		}
	}
	if len(announce) > 0 {
		if err := b.sendPostgres(sctx, announce); err != nil {
			b.dropped.Add(uint64(len(announce)))
			b.logger.WarnContext(ctx, "publishing events failed; subscribers will resync", "error", err, "events", len(announce))
			return
		}
		b.published.Add(uint64(len(announce)))
	}
}

func (b *EventBus) sendRedis(ctx context.Context, batch, announce []domain.Event) error {
	pipe := b.redis.client.Pipeline()
	if len(announce) > 0 {
		payload := append([]byte(b.origin), " ["...)
		for i := range announce {
			if i > 0 {
				payload = append(payload, ',')
			}
			payload = announce[i].AppendJSON(payload)
		}
		payload = append(payload, ']')
		pipe.Publish(ctx, b.redis.eventsChannel(), payload)
	}
	if b.readyQueue {
		// A batch can hold several events for one job (claimed, then
		// handed back): only the last says where it stands, and adds and
		// removes go out as two commands, so earlier ones are skipped.
		last := make(map[uuid.UUID]int, len(batch))
		for i, e := range batch {
			last[e.JobID] = i
		}
		var add []redis.Z
		var rem []any
		for i, e := range batch {
			if last[e.JobID] != i {
				continue
			}
			if e.Status == jobs.StateQueued {
				add = append(add, redis.Z{Score: readyScore(e.EffectivePriority, e.RunAt), Member: e.JobID.String()})
			} else {
				rem = append(rem, e.JobID.String())
			}
		}
		if len(add) > 0 {
			pipe.ZAdd(ctx, b.redis.readyKey(), add...)
		}
		if len(rem) > 0 {
			pipe.ZRem(ctx, b.redis.readyKey(), rem...)
		}
	}
	_, err := pipe.Exec(ctx)
	return err
}

const notifyEventsSQL = `SELECT count(pg_notify($1, p)) FROM unnest($2::text[]) AS p`

// sendPostgres sends events as NOTIFY payloads, all of a batch in one
// statement (one transaction): a commit per payload would cost more than
// the changes being announced.
func (b *EventBus) sendPostgres(ctx context.Context, events []domain.Event) error {
	_, err := b.pool.Exec(ctx, notifyEventsSQL, ChannelEvents, notifyPayloads(b.origin, events))
	return err
}

// maxNotifyPayload keeps NOTIFY payloads under PostgreSQL's 8,000 byte limit.
const maxNotifyPayload = 7900

// notifyPayloads packs events into JSON arrays of at most maxNotifyPayload
// bytes, each event encoded once.
func notifyPayloads(origin string, events []domain.Event) []string {
	var payloads []string
	buf := make([]byte, 0, maxNotifyPayload)
	head := origin + " ["
	var enc []byte
	for i := range events {
		e := &events[i]
		enc = e.AppendJSON(enc[:0])
		if len(buf) > 0 && len(buf)+len(enc)+2 > maxNotifyPayload {
			payloads = append(payloads, string(append(buf, ']')))
			buf = buf[:0]
		}
		if len(buf) == 0 {
			buf = append(buf, head...)
		} else {
			buf = append(buf, ',')
		}
		buf = append(buf, enc...)
	}
	if len(buf) > 0 {
		payloads = append(payloads, string(append(buf, ']')))
	}
	return payloads
}

// ReceivePostgres is the Listener callback for ChannelEvents.
func (b *EventBus) ReceivePostgres(payload string) { b.receive([]byte(payload)) }

func (b *EventBus) receive(payload []byte) {
	// "<origin> [events]": a process's own events were delivered when it
	// sent them. A bare array is a payload from a Flint before origins.
	if i := bytes.IndexByte(payload, ' '); i > 0 && payload[0] != '[' {
		if string(payload[:i]) == b.origin {
			return
		}
		payload = payload[i+1:]
	}
	var evs []domain.Event
	if err := json.Unmarshal(payload, &evs); err != nil || len(evs) == 0 {
		return
	}
	if b.deliver != nil {
		b.deliver(evs)
	}
}

// RunRedisSubscriber receives events published through Redis until ctx is
// done, resubscribing after outages.
func (b *EventBus) RunRedisSubscriber(ctx context.Context) error {
	if b.redis == nil {
		return nil
	}
	failures := 0
	for ctx.Err() == nil {
		if !b.redis.Healthy() {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
			continue
		}
		sub := b.redis.client.Subscribe(ctx, b.redis.eventsChannel())
		var err error
		for ctx.Err() == nil {
			var msg any
			msg, err = sub.ReceiveTimeout(ctx, 5*time.Second)
			if err != nil {
				if ctx.Err() != nil || !b.redis.Healthy() {
					break
				}
				if isTimeout(err) {
					continue
				}
				break
			}
			failures = 0
			if m, ok := msg.(*redis.Message); ok {
				b.receive([]byte(m.Payload))
			}
		}
		_ = sub.Close()
		if err != nil && ctx.Err() == nil && b.redis.Healthy() {
			// Redis answers PING but refuses the subscription (an ACL, a
			// proxy): back off rather than spin.
			failures++
			wait := min(time.Duration(failures)*200*time.Millisecond, 5*time.Second)
			if failures == 3 {
				b.logger.WarnContext(ctx, "subscribing to events failed; retrying", "error", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
	return nil
}

func isTimeout(err error) bool {
	type timeout interface{ Timeout() bool }
	t, ok := err.(timeout)
	return ok && t.Timeout()
}

// reScore reports whether e only re-scores a job in the ready queue.
func reScore(e domain.Event) bool { return e.At.IsZero() }
