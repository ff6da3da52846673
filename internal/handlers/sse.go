package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// sseHeartbeat is how often every event stream gets its heartbeat, so that
// proxies keep an idle stream open and a client that went is noticed.
const sseHeartbeat = 15 * time.Second

// streamRecheck is how often an open event stream asks again whether
// whoever opened it may still read it (server.recheck): a disabled
// person's or a revoked key's stream ends within this long. Each check is
// one indexed read per stream.
var streamRecheck = 5 * time.Second

// sseEvents handles GET /api/v1/sse/events: a Server-Sent Events stream of
// job events {"job_id","status","type","queue","attempt","at"}, filtered by
// job_id, type and status (comma-separated). Each event has an id; a client
// that reconnects with Last-Event-ID gets the events it missed, or an
// event named "resync" when they are no longer known, after which it
// should reload what it shows from the API. A stream whose key is revoked
// meanwhile ends with an event named "ended".
func (s *server) sseEvents(c *fiber.Ctx) error {
	f, err := parseEventFilter(c)
	if err != nil {
		return err
	}
	lastID := c.Get("Last-Event-ID", c.Query("last_event_id"))
	sub, replay, resync := s.broker.subscribe(f, lastID)
	return s.openEventStream(c, ": keep-alive\n\n", func(ctx context.Context, st *eventStream) {
		defer s.broker.unsubscribe(sub)
		streamEvents(ctx, st, s.broker, sub, replay, resync)
	})
}

// openEventStream answers c with a Server-Sent Events stream that write
// produces, under the server's base context (cancelled at shutdown). The
// headers keep proxies from caching or buffering it, the stream starts with
// the reconnect delay browsers should use, and beat (a comment, or an event
// the client watches for) is sent every sseHeartbeat while it lasts.
//
// Every streamRecheck the stream asks s.recheck's check whether its caller
// may still read it. When not (the session ended, the user was disabled,
// the key was revoked), it sends a last event, "ended" with the reason,
// and closes: nothing is written after it.
//
// The connection is not kept for another request ("Connection: close"): a
// browser that stops a stream whose connection could be reused first
// drains it for a while, and an event stream never ends, so six stopped
// streams would hold all of a browser's connections to the host. And since
// a client sends nothing once the stream is open, a read on the connection
// returns only when the client goes: it ends the stream at once, instead of
// at the next failed write.
func (s *server) openEventStream(c *fiber.Ctx, beat string, write func(ctx context.Context, st *eventStream)) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no")
	c.Context().SetConnectionClose()
	conn := c.Context().Conn()
	base := s.base
	still := s.recheck(c)
	logger := s.logger
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithCancel(base)
		defer cancel()
		if conn != nil {
			go func() {
				_ = conn.SetReadDeadline(time.Time{})
				var b [1]byte
				_, _ = conn.Read(b[:]) // the client went (or the server closes the connection)
				cancel()
			}()
		}
		fmt.Fprint(w, "retry: 2000\n\n")
		st := &eventStream{w: w}
		var beating sync.WaitGroup
		beating.Go(func() { st.heartbeat(ctx, cancel, sseHeartbeat, beat) })
		if still != nil {
			beating.Go(func() { st.guard(ctx, cancel, streamRecheck, still, logger) })
		}
		write(ctx, st)
		cancel()
		beating.Wait() // nothing may write to w once this function returns
	})
	return nil
}

// eventStream is an open event stream. Its writer is shared with the
// heartbeat and the guard, so every write goes through send.
type eventStream struct {
	mu    sync.Mutex
	w     *bufio.Writer
	ended bool // the guard ended the stream: nothing more is written
}

// send writes one or more whole messages with write and flushes them. It
// returns false when the flush fails (the client has gone) or the stream
// has ended.
func (st *eventStream) send(write func(w *bufio.Writer)) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ended {
		return false
	}
	write(st.w)
	return st.w.Flush() == nil
}

// guard runs still every interval until ctx is done. When still says the
// caller may no longer read, it writes the stream's last event ("ended",
// with the reason), lets nothing else be written after it, and ends the
// stream (stop). A check that fails (the database is unreachable) keeps
// the stream until a check can tell.
func (st *eventStream) guard(ctx context.Context, stop context.CancelFunc, every time.Duration, still streamCheck, logger *slog.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		why, err := still(checkCtx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				logger.WarnContext(ctx, "could not re-check an open event stream's access; checking again later", "component", "http", "error", err)
			}
			continue
		}
		if why == "" {
			continue
		}
		data, _ := json.Marshal(map[string]string{"reason": why})
		st.mu.Lock()
		fmt.Fprintf(st.w, "event: ended\ndata: %s\n\n", data)
		_ = st.w.Flush()
		st.ended = true
		st.mu.Unlock()
		stop()
		return
	}
}

// heartbeat sends beat every interval until ctx is done. A failed send
// ends the stream (stop) rather than waiting for its next message.
func (st *eventStream) heartbeat(ctx context.Context, stop context.CancelFunc, every time.Duration, beat string) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if !st.send(func(w *bufio.Writer) { _, _ = w.WriteString(beat) }) {
				stop()
				return
			}
		}
	}
}

// streamEvents writes the stream until the client goes, the broker drops
// it, or the server shuts down.
func streamEvents(ctx context.Context, st *eventStream, b *Broker, sub *subscriber, replay []brokerEvent, resync bool) {
	ok := st.send(func(w *bufio.Writer) {
		if resync {
			fmt.Fprintf(w, "id: %s\nevent: resync\ndata: {\"reason\":\"events since your last id are not available; reload from the API\"}\n\n", b.id(b.currentSeq()))
		}
		for _, e := range replay {
			writeEvent(w, b, e)
		}
	})
	for ok {
		select {
		case <-ctx.Done():
			return
		case <-sub.gone:
			st.send(func(w *bufio.Writer) {
				fmt.Fprint(w, "event: dropped\ndata: {\"reason\":\"this client fell behind; reconnect\"}\n\n")
			})
			return
		case e := <-sub.ch:
			ok = st.send(func(w *bufio.Writer) {
				writeEvent(w, b, e)
				for {
					select {
					case e := <-sub.ch:
						writeEvent(w, b, e)
					default:
						return
					}
				}
			})
		}
	}
}

func writeEvent(w *bufio.Writer, b *Broker, e brokerEvent) {
	if e.ev.Kind == domain.EventBatch && e.ev.BatchID != nil {
		data, _ := json.Marshal(batchEvent{BatchID: *e.ev.BatchID, State: string(e.ev.Status), At: e.ev.At})
		fmt.Fprintf(w, "id: %s\nevent: batch\ndata: %s\n\n", b.id(e.seq), data)
		return
	}
	data, _ := json.Marshal(e.ev)
	fmt.Fprintf(w, "id: %s\nevent: job\ndata: %s\n\n", b.id(e.seq), data)
}

// batchEvent is the data of an "event: batch": a batch settled.
type batchEvent struct {
	BatchID uuid.UUID `json:"batch_id"`
	State   string    `json:"state"`
	At      time.Time `json:"at"`
}

func (b *Broker) currentSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// parseEventFilter reads job_id, batch_id, type and status.
func parseEventFilter(c *fiber.Ctx) (eventFilter, error) {
	var f eventFilter
	if v := c.Query("batch_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return f, invalid("batch_id", "must be a batch id (UUID)")
		}
		f.batchID = id
	}
	if v := c.Query("job_id"); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			return f, invalid("job_id", "must be a job id (UUID)")
		}
		f.jobID = id
	}
	if v := c.Query("type"); v != "" {
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				if len(t) > jobs.MaxTypeLen || !jobs.CleanText(t) {
					return f, invalid("type", "must be job types separated by commas")
				}
				f.types = append(f.types, t)
			}
		}
	}
	if v := c.Query("status"); v != "" {
		for _, st := range strings.Split(v, ",") {
			state := jobs.State(strings.TrimSpace(st))
			if !state.Valid() {
				return f, invalid("status", fmt.Sprintf("unknown status %q; use one or more of %s", st, stateList()))
			}
			f.statuses = append(f.statuses, state)
		}
	}
	return f, nil
}
