package db

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flinthq/flint/internal/tracing"
	"github.com/flinthq/flint/jobs"
)

// Group commit for single enqueues.
//
// A web service enqueues one job per request, from many requests at once.
// Written one transaction each, every job costs a commit and its WAL
// flush, and the flushes, not the inserts, set the rate. So Store.Enqueue
// hands a single plain job (no dependencies, no recurrence) to a group
// committer: the jobs that arrive within EnqueueWindow of the first, up to
// EnqueueBatch of them (or, when no batch is being written, the jobs
// already waiting, at once: an idle service does not wait for a window
// nobody will join), go into the database as one multi-row insert in
// one transaction, and each caller is answered once that transaction has
// committed, with its own job (or, for a taken idempotency key, the job
// that holds it). Two jobs of one batch with the same key behave as two
// transactions one after the other: the first is inserted, the second
// gets the first.
//
// One caller's job never fails its neighbours: when the batch's
// transaction fails, each of its jobs is written again on its own, and
// only the one at fault gets the error. A caller whose context ends while
// its job still waits for a batch (queued, or in a batch still gathering)
// is answered with the context's error and its job is not written; once
// its batch is being written, it waits for the outcome (bounded by
// groupTimeout), so the answer is always true.

const (
	// DefaultEnqueueWindow is how long the group committer waits, after
	// the first job of a batch, for others to join it.
	DefaultEnqueueWindow = time.Millisecond
	// DefaultEnqueueBatch is the most jobs one group commit writes.
	DefaultEnqueueBatch = 500
	// groupFlushers is how many batches may be in flight at once: while
	// one waits for its commit's WAL flush, the next is being gathered
	// and inserted.
	groupFlushers = 4
	// groupTimeout bounds the writing of one batch.
	groupTimeout = 30 * time.Second
)

// groupRequest is one caller's job, waiting for its batch.
type groupRequest struct {
	ctx    context.Context
	params jobs.EnqueueParams
	state  atomic.Int32 // waiting, taken or abandoned
	done   chan groupResult
}

const (
	requestWaiting int32 = iota
	requestTaken
	requestAbandoned
)

type groupResult struct {
	enqueued jobs.Enqueued
	err      error
}

// groupCommitter gathers single enqueues into batches.
type groupCommitter struct {
	store  *Store
	window time.Duration
	max    int
	in     chan *groupRequest
	closed atomic.Bool
	stop   context.CancelFunc
	done   chan struct{}
	// batches and jobs count the group commits made and the jobs they
	// wrote, for tests and metrics.
	batches, jobs atomic.Uint64
	// writing counts the batches being written: with none, a batch does
	// not wait for its window.
	writing atomic.Int32
}

func newGroupCommitter(s *Store, window time.Duration, max int) *groupCommitter {
	if window < 0 {
		return nil
	}
	if window == 0 {
		window = DefaultEnqueueWindow
	}
	if max <= 0 {
		max = DefaultEnqueueBatch
	}
	return &groupCommitter{store: s, window: window, max: max, in: make(chan *groupRequest, 4*max), done: make(chan struct{})}
}

func (g *groupCommitter) start() {
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	running := make(chan struct{}, groupFlushers)
	go func() {
		defer close(g.done)
		for range groupFlushers {
			running <- struct{}{}
			go func() {
				defer func() { <-running }()
				g.run(ctx)
			}()
		}
		<-ctx.Done()
		for range groupFlushers {
			running <- struct{}{}
		}
	}()
}

// close writes what is waiting and stops the flushers.
func (g *groupCommitter) close() {
	g.closed.Store(true)
	g.stop()
	<-g.done
	for {
		select {
		case r := <-g.in:
			g.flush(context.Background(), []*groupRequest{r}).send()
		default:
			return
		}
	}
}

// submit enqueues p with the next batch and waits for the answer.
func (g *groupCommitter) submit(ctx context.Context, p jobs.EnqueueParams) (jobs.Enqueued, error) {
	if g.closed.Load() {
		return jobs.Enqueued{}, errStoreClosed
	}
	r := &groupRequest{ctx: ctx, params: p, done: make(chan groupResult, 1)}
	select {
	case g.in <- r:
	case <-ctx.Done():
		return jobs.Enqueued{}, ctx.Err()
	}
	select {
	case res := <-r.done:
		return res.enqueued, res.err
	case <-ctx.Done():
		if r.state.CompareAndSwap(requestWaiting, requestAbandoned) {
			return jobs.Enqueued{}, ctx.Err()
		}
		// Its batch is being written: the job may be stored already.
		res := <-r.done
		return res.enqueued, res.err
	}
}

// run gathers and writes batches until ctx is done.
func (g *groupCommitter) run(ctx context.Context) {
	batch := make([]*groupRequest, 0, g.max)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case r := <-g.in:
			batch = append(batch, r)
		}
		g.write(ctx, gatherBatch(ctx, g.in, batch, g.max, g.window, g.writing.Load() > 0))
	}
}

// gatherBatch fills batch, which holds a first request, from in up to max
// requests. While another batch is being written (busy), it waits up to
// window for more to join; then, and when nothing is being written, it
// takes only what already waits: nobody is about to join an idle
// committer, so an idle service's request goes at once, and batches form
// while others are written. The enqueue and step committers share it.
func gatherBatch[R any](ctx context.Context, in <-chan R, batch []R, max int, window time.Duration, busy bool) []R {
	if busy {
		timer := time.NewTimer(window)
		defer timer.Stop()
	gather:
		for len(batch) < max {
			select {
			case r := <-in:
				batch = append(batch, r)
			case <-timer.C:
				break gather
			case <-ctx.Done():
				break gather
			}
		}
	}
	for len(batch) < max {
		select {
		case r := <-in:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

// write flushes batch, counted in writing while it does. The count drops
// before the callers are answered: a caller that enqueues again at once
// must find the committer idle, not still writing its last job.
func (g *groupCommitter) write(ctx context.Context, batch []*groupRequest) {
	g.writing.Add(1)
	answers := g.flush(ctx, batch)
	g.writing.Add(-1)
	answers.send()
}

// answers are the outcomes of a flush, sent once it is over.
type answers []answer

type answer struct {
	r   *groupRequest
	res groupResult
}

func (a answers) send() {
	for _, x := range a {
		x.r.done <- x.res
	}
}

// flush writes a batch in one transaction, or, when that fails, each job
// on its own, and returns each caller's answer. Jobs whose callers have
// gone are left out.
func (g *groupCommitter) flush(ctx context.Context, gathered []*groupRequest) answers {
	batch := gathered[:0:0]
	for _, r := range gathered {
		if r.state.CompareAndSwap(requestWaiting, requestTaken) {
			batch = append(batch, r)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	out := make(answers, 0, len(batch))
	// The write is bounded by groupTimeout, and by the callers' own
	// deadlines when every one of them has one: a commit that hangs (a
	// primary waiting for a standby that was promoted away) must not hold
	// the flusher longer than anybody waits for it.
	deadline := time.Now().Add(groupTimeout)
	var latest time.Time
	allBounded := true
	for _, r := range batch {
		d, ok := r.ctx.Deadline()
		allBounded = allBounded && ok
		if ok && d.After(latest) {
			latest = d
		}
	}
	if allBounded && latest.Before(deadline) {
		deadline = latest
	}
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	params := make([]jobs.EnqueueParams, len(batch))
	for i, r := range batch {
		params[i] = r.params
	}
	var endSpan func(error)
	if tracing.Enabled() {
		wctx, endSpan = traceGroupCommit(wctx, params)
	}
	written, err := g.store.enqueueDirect(wctx, params)
	if endSpan != nil {
		endSpan(err)
	}
	if err == nil {
		g.batches.Add(1)
		g.jobs.Add(uint64(len(batch)))
		g.store.Announce(written)
		for i, r := range batch {
			out = append(out, answer{r, groupResult{enqueued: written[i]}})
		}
		return out
	}
	if len(batch) == 1 || !isDataError(err) {
		// One job, or the server or connection failed rather than a row:
		// every job of the batch gets the error (and may be retried).
		for _, r := range batch {
			out = append(out, answer{r, groupResult{err: err}})
		}
		return out
	}
	// A row the database refused: isolate the job at fault, the others
	// must not fail with it.
	for _, r := range batch {
		one, err := g.store.enqueueDirect(wctx, []jobs.EnqueueParams{r.params})
		if err != nil {
			out = append(out, answer{r, groupResult{err: err}})
			continue
		}
		g.batches.Add(1)
		g.jobs.Add(1)
		g.store.Announce(one)
		out = append(out, answer{r, groupResult{enqueued: one[0]}})
	}
	return out
}

// errStoreClosed answers an enqueue made after Store.Close.
var errStoreClosed = errors.New("enqueue: the store is closed")

// groupable reports whether params can join a group commit: one job
// without dependencies or a recurrence (those take statements of their
// own).
func groupable(params []jobs.EnqueueParams) bool {
	return len(params) == 1 && !hasEdgesOrSeries(params)
}

// GroupCommits returns how many group commits the store made and how many
// jobs they wrote.
func (s *Store) GroupCommits() (batches, jobs uint64) {
	if s.group == nil {
		return 0, 0
	}
	return s.group.batches.Load(), s.group.jobs.Load()
}

// enqueueDirect writes params in one transaction (or one statement) of
// their own, without announcing them.
func (s *Store) enqueueDirect(ctx context.Context, params []jobs.EnqueueParams) ([]jobs.Enqueued, error) {
	if copyable(params) {
		return s.enqueueCopy(ctx, params)
	}
	if !needsTx(params) {
		return enqueueTx(ctx, s.pool, params...)
	}
	var out []jobs.Enqueued
	err := s.withTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = enqueueTx(ctx, tx, params...)
		return err
	})
	return out, err
}

// isDataError reports whether err is PostgreSQL refusing the data
// (SQLSTATE classes 22 and 23: a bad value, a duplicate id) rather than a
// failing server or connection.
func isDataError(err error) bool {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return strings.HasPrefix(pg.Code, "22") || strings.HasPrefix(pg.Code, "23")
	}
	return false
}
