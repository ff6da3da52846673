package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/internal/views"
	"github.com/flinthq/flint/jobs"
)

// The dashboard's live stream.
//
// A browser holds one stream, however many dashboard tabs it has open: one
// tab (the leader) opens GET /events and shares what arrives with the other
// tabs over a BroadcastChannel (static/live.js). So the stream cannot be
// shaped for one page: it says what changed, in small JSON "update" events,
// and each page fetches the fragments it shows (rows, counts, tables).
//
//	event: update
//	data: {"jobs":[{"id":…,"status":…,"type":…,"queue":…,"attempt":…,"new":true}],
//	       "overflow":N, "kinds":[{"status":…,"type":…,"queue":…,"new":true}],
//	       "topics":["stats",…]}
//
//   - jobs: each job that changed in the window (its latest state), at most
//     liveJobCap; overflow counts the ones left out, after which pages
//     refresh every job they show.
//   - kinds: the distinct (status, type, queue, new) of every job that
//     changed in the window, so a filtered list can offer "new jobs" even
//     when jobs overflowed; kinds_more says there were more kinds than
//     listed. "new" marks a job just enqueued (no attempt yet).
//   - topics: "stats" (jobs moved; at most once a second, and once more
//     liveStatsTrail after the last), "batches" (a batch's member or
//     callback moved, or a batch settled), "workers", "audit", "settings",
//     "logs", "alerts": what a page without job rows refreshes on.
//
// The stream starts with an "event: ping" and has one every sseHeartbeat
// (its heartbeat), which lets the leader notice a dead stream. It ends
// with an "event: ended" when the session no longer holds (openEventStream
// re-checks it), upon which every tab reloads into the sign-in page.

// livePing is the dashboard stream's first message and its heartbeat.
const livePing = "event: ping\ndata: {}\n\n"

const (
	liveWindow    = 250 * time.Millisecond // coalescing window of updates
	liveStatsEach = time.Second            // "stats" at most this often
	// countsTTL is how long the overview's counts and GET /api/v1/stats
	// are kept (server.overview, server.stats).
	countsTTL = time.Second
	// liveStatsTrail: once jobs stop moving, "stats" is sent once more
	// this long after the last time, past countsTTL: a page that fetched
	// its counts on the last "stats" may have been given counts kept from
	// before the move that caused it, and no later move would correct
	// them.
	liveStatsTrail = countsTTL + 500*time.Millisecond
	liveJobCap     = 200 // jobs listed per update
	liveKindCap    = 100 // distinct kinds of jobs per update

	maxRowsPerFetch = 100 // rows a page may fetch at once (a list shows 50)
)

// Topics that no job event announces (workers, settings, audit, logs,
// alerts) are read from the database every liveTopicPoll while any
// dashboard stream is open.
var liveTopicPoll = 2 * time.Second

type liveJob struct {
	ID      uuid.UUID  `json:"id"`
	Status  jobs.State `json:"status"`
	Type    string     `json:"type"`
	Queue   string     `json:"queue"`
	Attempt int        `json:"attempt"`
	New     bool       `json:"new,omitempty"` // just enqueued: no attempt yet
}

type liveKind struct {
	Status jobs.State `json:"status"`
	Type   string     `json:"type"`
	Queue  string     `json:"queue"`
	New    bool       `json:"new,omitempty"`
}

// liveUpdate accumulates one window of changes.
type liveUpdate struct {
	Jobs      []liveJob  `json:"jobs,omitempty"`
	Overflow  int        `json:"overflow,omitempty"`
	Kinds     []liveKind `json:"kinds,omitempty"`
	KindsMore bool       `json:"kinds_more,omitempty"`
	Topics    []string   `json:"topics,omitempty"`

	index map[uuid.UUID]int
	kinds map[liveKind]bool
	stats bool
}

func (u *liveUpdate) addJob(e domain.Event) {
	if e.BatchID != nil {
		u.addTopics("batches")
	}
	if e.Kind == domain.EventBatch {
		return // a batch settled: no job moved
	}
	u.stats = true
	j := liveJob{ID: e.JobID, Status: e.Status, Type: e.Type, Queue: e.Queue, Attempt: e.Attempt,
		New: e.Attempt == 0 && e.Status.Waiting()}
	if i, ok := u.index[e.JobID]; ok {
		j.New = j.New || u.Jobs[i].New
		u.Jobs[i] = j
	} else if len(u.Jobs) < liveJobCap {
		if u.index == nil {
			u.index = map[uuid.UUID]int{}
		}
		u.index[e.JobID] = len(u.Jobs)
		u.Jobs = append(u.Jobs, j)
	} else {
		u.Overflow++
	}
	k := liveKind{Status: e.Status, Type: e.Type, Queue: e.Queue, New: j.New}
	switch {
	case u.kinds[k]:
	case len(u.Kinds) < liveKindCap:
		if u.kinds == nil {
			u.kinds = map[liveKind]bool{}
		}
		u.kinds[k] = true
		u.Kinds = append(u.Kinds, k)
	default:
		u.KindsMore = true
	}
}

func (u *liveUpdate) addTopics(topics ...string) {
	for _, t := range topics {
		if !slices.Contains(u.Topics, t) {
			u.Topics = append(u.Topics, t)
		}
	}
}

// ready reports whether the update has anything to send now (stats held
// back for their once-a-second limit do not count).
func (u *liveUpdate) ready() bool {
	return len(u.Jobs) > 0 || u.Overflow > 0 || len(u.Topics) > 0
}

// liveTopics tracks, per topic, a fingerprint of what the dashboard shows
// (the newest audit entry, the newest settings change, the set of live
// workers, the newest log entry) and a version that moves when it changes.
// One poller per process keeps them; every open stream waits on changed.
type liveTopics struct {
	mu       sync.Mutex
	prints   map[string]string
	versions map[string]uint64
	changed  chan struct{} // closed and replaced when a version moves
	streams  atomic.Int32  // open dashboard streams
}

func newLiveTopics() *liveTopics {
	return &liveTopics{prints: map[string]string{}, versions: map[string]uint64{}, changed: make(chan struct{})}
}

// set records topic's fingerprint; a different one than before moves its
// version. The first one seen is a baseline.
func (t *liveTopics) set(topic, print string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	old, known := t.prints[topic]
	t.prints[topic] = print
	if !known || old == print {
		return
	}
	t.versions[topic]++
	close(t.changed)
	t.changed = make(chan struct{})
}

// since returns the topics whose versions moved past seen, the versions
// now, and the channel closed at the next change.
func (t *liveTopics) since(seen map[string]uint64) (moved []string, now map[string]uint64, next <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, v := range t.versions {
		if seen[k] != v {
			moved = append(moved, k)
		}
	}
	slices.Sort(moved)
	return moved, maps.Clone(t.versions), t.changed
}

// watchTopics polls the topics while any dashboard stream is open.
func (s *server) watchTopics(ctx context.Context) {
	tick := time.NewTicker(liveTopicPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if s.live.streams.Load() > 0 {
			s.pollTopics(ctx)
		}
	}
}

// pollTopics reads the database topics; a topic that cannot be read now
// keeps its fingerprint.
func (s *server) pollTopics(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if ws, err := s.workers(ctx); err == nil {
		ids := make([]string, len(ws))
		for i, w := range ws {
			ids[i] = w.ID
		}
		slices.Sort(ids)
		s.live.set("workers", strings.Join(ids, ","))
	}
	if ch, err := s.settingsStore.ListSettingsChanges(ctx, 1); err == nil {
		print := ""
		if len(ch) > 0 {
			print = ch[0].Key + "@" + ch[0].ChangedAt.Format(time.RFC3339Nano)
		}
		s.live.set("settings", print)
	}
	if s.logs != nil {
		if mark, err := s.logs.LogMark(ctx); err == nil {
			s.live.set("logs", mark)
		}
	}
	if s.alerts != nil {
		if mark, err := s.alerts.AlertsMark(ctx); err == nil {
			s.live.set("alerts", mark)
		}
	}
	if s.auditStore != nil {
		if es, err := s.auditStore.ListAudit(ctx, domain.AuditQuery{Limit: 1}); err == nil {
			print := ""
			if len(es) > 0 {
				print = strconv.FormatInt(es[0].ID, 10)
			}
			s.live.set("audit", print)
		}
	}
}

// dashboardEvents handles GET /events, the browser's one live stream.
func (s *server) dashboardEvents(c *fiber.Ctx) error {
	return s.openEventStream(c, livePing, func(ctx context.Context, st *eventStream) {
		if s.live.streams.Add(1) == 1 {
			// Nobody polled while no stream was open: take the topics as
			// they are now before this stream starts from them, or a
			// change before the poller's next pass would pass for the
			// way things were. (The page refreshes its live parts once
			// its stream is open, which covers what came before.)
			s.pollTopics(ctx)
		}
		defer s.live.streams.Add(-1)
		s.streamDashboard(ctx, st)
	})
}

// liveFold folds job events into the next update as the broker delivers
// them, so a burst of any size costs the stream one small update and never
// a queue that could overflow.
type liveFold struct {
	mu     sync.Mutex
	u      liveUpdate
	signal chan struct{} // holds one token while events wait
}

func (f *liveFold) add(e domain.Event) {
	f.mu.Lock()
	f.u.addJob(e)
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
}

// take moves the folded jobs into u, which holds none (every update sent
// takes them all).
func (f *liveFold) take(u *liveUpdate) {
	f.mu.Lock()
	defer f.mu.Unlock()
	u.Jobs, u.Overflow, u.Kinds, u.KindsMore = f.u.Jobs, f.u.Overflow, f.u.Kinds, f.u.KindsMore
	u.stats = u.stats || f.u.stats
	u.addTopics(f.u.Topics...)
	f.u = liveUpdate{}
}

// streamDashboard writes updates until the client goes or the server shuts
// down. A busy system sends thousands of events a second; a browser gets at
// most four updates a second, each bounded in size.
func (s *server) streamDashboard(ctx context.Context, st *eventStream) {
	fold := &liveFold{signal: make(chan struct{}, 1)}
	sub := s.broker.subscribeSink(eventFilter{}, fold.add)
	defer s.broker.unsubscribe(sub)
	_, seen, topicsMoved := s.live.since(nil)
	if !st.send(func(w *bufio.Writer) { _, _ = w.WriteString(livePing) }) {
		return
	}
	var (
		u         liveUpdate
		flush     <-chan time.Time
		trail     <-chan time.Time
		lastStats time.Time
	)
	arm := func(d time.Duration) {
		if flush == nil {
			flush = time.After(d)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-fold.signal:
			arm(liveWindow)
		case <-topicsMoved:
			var moved []string
			moved, seen, topicsMoved = s.live.since(seen)
			u.addTopics(moved...)
			arm(liveWindow)
		case <-trail:
			trail = nil
			if !u.stats && time.Since(lastStats) >= liveStatsEach {
				u.addTopics("stats")
				lastStats = time.Now()
				arm(0)
			}
		case <-flush:
			flush = nil
			fold.take(&u)
			if u.stats {
				if wait := liveStatsEach - time.Since(lastStats); wait > 0 {
					arm(wait) // counts at most once a second
				} else {
					u.addTopics("stats")
					u.stats = false
					lastStats = time.Now()
					trail = time.After(liveStatsTrail)
				}
			}
			if !u.ready() {
				continue
			}
			data, _ := json.Marshal(&u)
			if !st.send(func(w *bufio.Writer) { fmt.Fprintf(w, "event: update\ndata: %s\n\n", data) }) {
				return
			}
			u = liveUpdate{stats: u.stats}
		}
	}
}

// jobRows handles GET /jobs/rows?kind=jobs|dlq|bin&ids=…: the table rows of
// those jobs as they are now, for a list page to swap in. Jobs that no
// longer exist are left out.
func (s *server) jobRows(c *fiber.Ctx) error {
	kind := c.Query("kind")
	if kind != "jobs" && kind != "dlq" && kind != "bin" {
		return invalid("kind", "must be jobs, dlq or bin")
	}
	var ids []uuid.UUID
	for part := range strings.SplitSeq(c.Query("ids"), ",") {
		if part == "" {
			continue
		}
		id, err := uuid.Parse(part)
		if err != nil || len(ids) >= maxRowsPerFetch {
			return invalid("ids", fmt.Sprintf("must be up to %d job ids separated by commas", maxRowsPerFetch))
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return invalid("ids", "must name at least one job")
	}
	js, err := s.jobStore.GetJobs(c.UserContext(), ids)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.JobRows(js, kind, s.clock.Now()))
}
