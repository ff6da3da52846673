package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"flint/jobs"
)

// sseHeartbeat is how often an idle stream gets a comment line, so proxies
// keep it open and dead clients are noticed.
var sseHeartbeat = 15 * time.Second

// sseEvents handles GET /api/v1/sse/events: a Server-Sent Events stream of
// job events {"job_id","status","type","queue","attempt","at"}, filtered by
// job_id, type and status (comma-separated). Each event has an id; a client
// that reconnects with Last-Event-ID gets the events it missed, or an
// event named "resync" when they are no longer known, after which it
// should reload what it shows from the API.
func (s *server) sseEvents(c *fiber.Ctx) error {
	f, err := parseEventFilter(c)
	if err != nil {
		return err
	}
	lastID := c.Get("Last-Event-ID", c.Query("last_event_id"))
	sub, replay, resync := s.broker.subscribe(f, lastID)
	return s.openEventStream(c, func(ctx context.Context, w *bufio.Writer) {
		defer s.broker.unsubscribe(sub)
		streamEvents(ctx, w, s.broker, sub, replay, resync)
	})
}

// openEventStream answers c with a Server-Sent Events stream that write
// produces, under the server's base context (cancelled at shutdown). The
// headers keep proxies from caching or buffering it, and the stream starts
// with the reconnect delay browsers should use.
//
// The connection is not kept for another request ("Connection: close"): a
// browser that stops a stream whose connection could be reused first
// drains it for a while, and an event stream never ends, so six stopped
// streams would hold all of a browser's connections to the host. And since
// a client sends nothing once the stream is open, a read on the connection
// returns only when the client goes: it ends the stream at once, instead of
// at the next failed write.
func (s *server) openEventStream(c *fiber.Ctx, write func(ctx context.Context, w *bufio.Writer)) error {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Set("X-Accel-Buffering", "no")
	c.Context().SetConnectionClose()
	conn := c.Context().Conn()
	base := s.base
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
		write(ctx, w)
	})
	return nil
}

// streamEvents writes the stream until the client goes, the broker drops
// it, or the server shuts down.
func streamEvents(ctx context.Context, w *bufio.Writer, b *Broker, sub *subscriber, replay []brokerEvent, resync bool) {
	if resync {
		fmt.Fprintf(w, "id: %s\nevent: resync\ndata: {\"reason\":\"events since your last id are not available; reload from the API\"}\n\n", b.id(b.currentSeq()))
	}
	for _, e := range replay {
		writeEvent(w, b, e)
	}
	if w.Flush() != nil {
		return
	}
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sub.gone:
			fmt.Fprint(w, "event: dropped\ndata: {\"reason\":\"this client fell behind; reconnect\"}\n\n")
			_ = w.Flush()
			return
		case e := <-sub.ch:
			writeEvent(w, b, e)
		drain:
			for {
				select {
				case e := <-sub.ch:
					writeEvent(w, b, e)
				default:
					break drain
				}
			}
		case <-beat.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		}
		if w.Flush() != nil {
			return
		}
	}
}

func writeEvent(w *bufio.Writer, b *Broker, e brokerEvent) {
	data, _ := json.Marshal(e.ev)
	fmt.Fprintf(w, "id: %s\nevent: job\ndata: %s\n\n", b.id(e.seq), data)
}

func (b *Broker) currentSeq() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// parseEventFilter reads job_id, type and status.
func parseEventFilter(c *fiber.Ctx) (eventFilter, error) {
	var f eventFilter
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
