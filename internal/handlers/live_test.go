package handlers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/flinthq/flint/internal/db/dbtest"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/handlers"
	"github.com/flinthq/flint/internal/logs"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// liveUpdate mirrors the JSON of the dashboard stream's "update" event.
type liveUpdate struct {
	Jobs []struct {
		ID      uuid.UUID `json:"id"`
		Status  string    `json:"status"`
		Type    string    `json:"type"`
		Queue   string    `json:"queue"`
		Attempt int       `json:"attempt"`
		New     bool      `json:"new"`
	} `json:"jobs"`
	Overflow int `json:"overflow"`
	Kinds    []struct {
		Status, Type, Queue string
		New                 bool
	} `json:"kinds"`
	KindsMore bool     `json:"kinds_more"`
	Topics    []string `json:"topics"`
}

type liveRig struct {
	*dashBundle
	base   string
	broker *handlers.Broker
}

// liveSetup serves the dashboard on a real port (streams do not end, so
// they cannot go through app.Test) with a broker the test feeds directly.
func liveSetup(t *testing.T) *liveRig {
	t.Helper()
	store, _ := dbtest.NewStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	_, err := store.EnsureUser(ctx, adminEmail, adminPassword, "admin")
	require.NoError(t, err)
	reg := jobs.NewRegistry()
	domain.RegisterBuiltins(reg, domain.BuiltinDeps{})
	broker := handlers.NewBroker(1000)
	app := handlers.New(handlers.Config{APIKey: apiKey, Dashboard: store, Audit: store, Logs: store, Broker: broker, BaseContext: ctx,
		Session: handlers.SessionConfig{Key: []byte("0123456789abcdef0123456789abcdef")}},
		store, reg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.ShutdownWithTimeout(time.Second) })
	b := &dashBundle{app: app, store: store, ctx: ctx, cookies: map[string]string{}}
	b.login(t, adminEmail, adminPassword, http.StatusSeeOther)
	return &liveRig{dashBundle: b, base: "http://" + ln.Addr().String(), broker: broker}
}

type liveMsg struct {
	event  string
	update liveUpdate
	at     time.Time
}

// openLive opens GET /events as the signed-in user and decodes what comes.
func (r *liveRig) openLive(t *testing.T) <-chan liveMsg {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, r.base+"/events", nil)
	for k, v := range r.cookies {
		req.AddCookie(&http.Cookie{Name: k, Value: v})
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	require.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	out := make(chan liveMsg, 1000)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var m liveMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				m.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: ") && m.event == "update":
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m.update) != nil {
					m.event = "bad json"
				}
			case line == "" && m.event != "":
				m.at = time.Now()
				out <- m
				m = liveMsg{}
			}
		}
	}()
	return out
}

// nextUpdate returns the next update event, skipping pings.
func nextUpdate(t *testing.T, ch <-chan liveMsg, within time.Duration) liveMsg {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case m, ok := <-ch:
			require.True(t, ok, "the stream ended")
			require.NotEqual(t, "bad json", m.event)
			if m.event == "update" {
				return m
			}
		case <-deadline:
			t.Fatalf("no update within %s", within)
		}
	}
}

// TestDashboardStreamCoalesces: a burst of events reaches the browser as
// one bounded update (and never gets the stream dropped for being slow)
// that still says which kinds of jobs moved.
func TestDashboardStreamCoalesces(t *testing.T) {
	t.Parallel()
	r := liveSetup(t)
	ch := r.openLive(t)
	first := <-ch
	require.Equal(t, "ping", first.event, "the stream opens with a ping")

	// Five thousand at once: ten times what a queued subscriber could hold.
	burst := make([]domain.Event, 5000)
	for i := range burst {
		burst[i] = domain.Event{JobID: uuid.New(), Status: jobs.StateQueued, Type: "noop", Queue: "default", At: time.Now()}
	}
	burst[4999] = domain.Event{JobID: uuid.New(), Status: jobs.StateDeadLetter, Type: "fail", Queue: "mail", Attempt: 4}
	r.broker.Deliver(burst)

	// However long delivering takes, the burst arrives in a few updates of
	// at most 200 jobs each, counting the rest, each job in its latest state.
	var listed, overflow, updates int
	kinds := map[string]bool{}
	stats := false
	for listed+overflow < 5000 {
		u := nextUpdate(t, ch, 5*time.Second).update
		updates++
		require.LessOrEqual(t, len(u.Jobs), 200, "an update lists at most 200 jobs")
		listed += len(u.Jobs)
		overflow += u.Overflow
		for _, k := range u.Kinds {
			kinds[fmt.Sprintf("%s/%s/%s/%v", k.Status, k.Type, k.Queue, k.New)] = true
		}
		stats = stats || slices.Contains(u.Topics, "stats")
	}
	require.LessOrEqual(t, updates, 12, "coalesced, not one update per event")
	require.GreaterOrEqual(t, overflow, 4000, "the rest is counted")
	require.Equal(t, 5000, listed+overflow)
	require.True(t, stats, "counts changed")
	require.Equal(t, map[string]bool{"queued/noop/default/true": true, "dead_letter/fail/mail/false": true}, kinds)
}

// TestDashboardStreamListsAJobOnce: a job that moves twice in a window is
// listed once, in its latest state, still marked as just enqueued.
func TestDashboardStreamListsAJobOnce(t *testing.T) {
	t.Parallel()
	r := liveSetup(t)
	ch := r.openLive(t)
	require.Equal(t, "ping", (<-ch).event)

	twice := uuid.New()
	r.broker.Deliver([]domain.Event{{JobID: twice, Status: jobs.StateQueued, Type: "noop", Queue: "default"},
		{JobID: twice, Status: jobs.StateRunning, Type: "noop", Queue: "default", Attempt: 1}})
	u := nextUpdate(t, ch, 5*time.Second).update
	require.Len(t, u.Jobs, 1)
	require.Equal(t, twice, u.Jobs[0].ID)
	require.Equal(t, "running", u.Jobs[0].Status)
	require.True(t, u.Jobs[0].New)
}

// TestDashboardStreamPacesCounts: changes a few hundred milliseconds apart
// are each listed at once, on their own; the counts ("stats") that they
// move come at most once a second, in a later update if need be.
func TestDashboardStreamPacesCounts(t *testing.T) {
	t.Parallel()
	r := liveSetup(t)
	ch := r.openLive(t)
	require.Equal(t, "ping", (<-ch).event)

	var statsAt []time.Time
	record := func(m liveMsg) {
		if slices.Contains(m.update.Topics, "stats") {
			statsAt = append(statsAt, m.at)
		}
	}
	for i := 0; i < 4; i++ {
		id := uuid.New()
		sent := time.Now()
		r.broker.Deliver([]domain.Event{{JobID: id, Status: jobs.StateCompleted, Type: "noop", Queue: "default", Attempt: 1}})
		for {
			m := nextUpdate(t, ch, 5*time.Second)
			record(m)
			if len(m.update.Jobs) == 1 && m.update.Jobs[0].ID == id {
				require.Zero(t, m.update.Overflow)
				require.Less(t, m.at.Sub(sent), time.Second, "a row's change is not held back for the counts")
				break
			}
			require.Empty(t, m.update.Jobs, "only the counts come in between")
		}
		time.Sleep(300 * time.Millisecond) // the scenario: the next change comes a moment later
	}
	// The counts held back by the last changes come within a second.
	deadline := time.After(1500 * time.Millisecond)
	for waiting := true; waiting; {
		select {
		case m := <-ch:
			record(m)
		case <-deadline:
			waiting = false
		}
	}
	require.GreaterOrEqual(t, len(statsAt), 2)
	for i := 1; i < len(statsAt); i++ {
		require.GreaterOrEqual(t, statsAt[i].Sub(statsAt[i-1]), 900*time.Millisecond, "counts at most once a second")
	}
}

// TestDashboardStreamTopics: changes that no job event announces (an audit
// entry, a settings change from another process, log entries any process
// stored) reach open streams.
func TestDashboardStreamTopics(t *testing.T) {
	t.Parallel()
	r := liveSetup(t)
	ch := r.openLive(t)
	// The stream's first ping comes once the poller has taken the topics
	// as they are: what changes from here on is news.
	require.Equal(t, "ping", (<-ch).event)

	require.NoError(t, r.store.RecordAudit(r.ctx, domain.AuditEntry{Actor: "elsewhere", Source: "api", Action: "purge"}))
	u := nextUpdate(t, ch, 5*time.Second).update
	require.Equal(t, []string{"audit"}, u.Topics)

	_, _, err := r.store.UpdateSettings(r.ctx, map[string]json.RawMessage{"dlq_threshold": json.RawMessage("7")}, "elsewhere")
	require.NoError(t, err)
	u = nextUpdate(t, ch, 5*time.Second).update
	require.Contains(t, u.Topics, "settings")

	require.NoError(t, r.store.InsertLogs(r.ctx, logs.Process{ID: "elsewhere", Host: "h", Role: "worker"},
		[]logs.Entry{{Time: time.Now(), Level: "INFO", Msg: "something happened"}}))
	require.Eventually(t, func() bool { return slices.Contains(nextUpdate(t, ch, 20*time.Second).update.Topics, "logs") },
		20*time.Second, time.Millisecond)
}

// TestJobRows: the rows a list page fetches when its jobs change, and the
// refusals for what it must not ask.
func TestJobRows(t *testing.T) {
	t.Parallel()
	b := dashSetup(t)
	a := b.enqueue(t, jobs.EnqueueParams{Type: "noop", Queue: "rows"})
	c := b.enqueue(t, jobs.EnqueueParams{Type: "sleep", Queue: "rows"})
	p := b.request(t, http.MethodGet, "/jobs/rows?kind=jobs&ids="+a.ID.String()+","+c.ID.String()+","+uuid.NewString(), nil, "HX-Request", "true")
	require.Equal(t, http.StatusOK, p.status, p.body)
	doc := parseHTML(t, p.body)
	rows := findAll(doc, func(n *html.Node) bool { return n.Data == "tr" })
	require.Len(t, rows, 2, "a job that does not exist is left out")
	for _, row := range rows {
		require.Equal(t, "job-row", attr(row, "data-testid"))
		require.Contains(t, []string{views.JobRowID(a.ID), views.JobRowID(c.ID)}, attr(row, "id"))
		require.Equal(t, "queued", attr(row, "data-status"))
	}
	for q, field := range map[string]string{
		"?kind=nope&ids=" + a.ID.String(): "kind",
		"?kind=jobs&ids=not-a-job":        "ids",
		"?kind=dlq":                       "ids",
		"?kind=bin&ids=" + strings.Repeat(a.ID.String()+",", 101): "ids",
	} {
		p := b.request(t, http.MethodGet, "/jobs/rows"+q, nil)
		require.Equal(t, http.StatusUnprocessableEntity, p.status, q)
		require.Contains(t, p.body, `"field":"`+field+`"`, q)
	}
}

// parseHTML parses a page or fragment; rows are parsed inside a table, as
// the browser does when it swaps them in.
func parseHTML(t *testing.T, body string) *html.Node {
	t.Helper()
	if strings.HasPrefix(strings.TrimSpace(body), "<tr") {
		body = "<table><tbody>" + body + "</tbody></table>"
	}
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err)
	return doc
}

func findAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// TestStatsTrailTheLastMove: once jobs stop moving, the counts are
// announced once more after the counts' cache has expired, so a page that
// fetched them on the last announcement, and was given counts kept from
// before the move, is corrected; then nothing more comes.
func TestStatsTrailTheLastMove(t *testing.T) {
	t.Parallel()
	r := liveSetup(t)
	ch := r.openLive(t)
	require.Equal(t, "ping", (<-ch).event)

	sent := time.Now()
	r.broker.Deliver([]domain.Event{{JobID: uuid.New(), Status: jobs.StateScheduled, Type: "noop", Queue: "default"}})
	var statsAt []time.Duration
	deadline := time.After(handlers.LiveStatsTrail + 3*time.Second)
	for waiting := true; waiting; {
		select {
		case m, ok := <-ch:
			require.True(t, ok)
			if slices.Contains(m.update.Topics, "stats") {
				statsAt = append(statsAt, m.at.Sub(sent))
			}
		case <-deadline:
			waiting = false
		}
	}
	require.Len(t, statsAt, 2, "the move's counts, then once more: %v", statsAt)
	require.Less(t, statsAt[0], time.Second)
	// Measured from the move, not from the first update's arrival, which
	// a loaded machine delays while the trail's timer already runs.
	require.GreaterOrEqual(t, statsAt[1], handlers.LiveStatsTrail, "the trailing counts come a trail after the move: %v", statsAt)
}
