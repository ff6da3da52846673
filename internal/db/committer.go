package db

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// committer gathers the single writes of many callers (one step record,
// one signal) into batches, writes each batch as one statement in one
// transaction, and answers every caller once that transaction is over.
// Batches form as the enqueue group commit's do (gatherBatch): with
// nothing being written a request goes at once (written by its caller's
// goroutine when nothing else waits either); while a batch is written the
// next one gathers for up to window.
//
// A batch holds one request per key (a job and a step name, a job): the
// statement locks and moves each row once, so a second request for the
// same key is written on its own after the batch, seeing the first. One
// caller never fails its neighbours: when the database refuses a batch
// for its data, each request is written again on its own. A caller whose
// context ends while its request still waits is answered with the
// context's error and nothing of it is written; once its batch is being
// written it waits for the outcome (bounded by groupTimeout), so the
// answer is always true.
type committer[R, A any, K comparable] struct {
	what     string // for errors: "record step", "send signal"
	max      int
	window   time.Duration
	flushers int
	key      func(R) K
	// write writes a batch in one statement and returns each request's
	// answer, in order; fail is the answer of a request that got err.
	write func(ctx context.Context, batch []R) ([]A, error)
	fail  func(err error) A

	in      chan *pending[R, A]
	closed  atomic.Bool
	stop    context.CancelFunc
	done    chan struct{}
	writing atomic.Int32
	// batches and written count the statements that succeeded and the
	// requests they held, for tests and measurements.
	batches, written atomic.Uint64
}

// pending is one caller's request, waiting for its batch.
type pending[R, A any] struct {
	ctx   context.Context
	req   R
	state atomic.Int32 // requestWaiting, requestTaken or requestAbandoned
	done  chan A
}

func (c *committer[R, A, K]) start() {
	c.in = make(chan *pending[R, A], 4*c.max)
	c.done = make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	c.stop = cancel
	finished := make(chan struct{}, c.flushers)
	for range c.flushers {
		go func() {
			defer func() { finished <- struct{}{} }()
			c.run(ctx)
		}()
	}
	go func() {
		for range c.flushers {
			<-finished
		}
		close(c.done)
	}()
}

// close writes what is waiting and stops the flushers.
func (c *committer[R, A, K]) close() {
	c.closed.Store(true)
	c.stop()
	<-c.done
	for {
		select {
		case p := <-c.in:
			c.flush(context.Background(), []*pending[R, A]{p})
		default:
			return
		}
	}
}

// submit writes req with the next batch and waits for the answer.
func (c *committer[R, A, K]) submit(ctx context.Context, req R) A {
	if c.closed.Load() {
		return c.fail(errors.New(c.what + ": the store is closed"))
	}
	if err := ctx.Err(); err != nil {
		return c.fail(err) // gone already: nothing is written
	}
	p := &pending[R, A]{ctx: ctx, req: req, done: make(chan A, 1)}
	if len(c.in) == 0 && c.writing.CompareAndSwap(0, 1) {
		// Nothing is being written and nothing waits: nobody is about to
		// join, so the caller writes its request itself, sparing a lone
		// sender two hand-overs between goroutines. Requests arriving
		// meanwhile gather for the flushers, which see a write under way.
		c.flush(ctx, []*pending[R, A]{p})
		c.writing.Add(-1)
		return <-p.done
	}
	select {
	case c.in <- p:
	case <-ctx.Done():
		return c.fail(ctx.Err())
	}
	select {
	case a := <-p.done:
		return a
	case <-ctx.Done():
		if p.state.CompareAndSwap(requestWaiting, requestAbandoned) {
			return c.fail(ctx.Err())
		}
		return <-p.done // its batch is being written: it may be stored
	}
}

// run gathers and writes batches until ctx is done.
func (c *committer[R, A, K]) run(ctx context.Context) {
	batch := make([]*pending[R, A], 0, c.max)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case p := <-c.in:
			batch = append(batch, p)
		}
		batch = gatherBatch(ctx, c.in, batch, c.max, c.window, c.writing.Load() > 0)
		c.writing.Add(1)
		c.flush(ctx, batch)
		c.writing.Add(-1)
	}
}

// flush writes the requests of gathered whose callers still wait, in one
// statement (repeated keys after it, on their own), and answers each.
func (c *committer[R, A, K]) flush(ctx context.Context, gathered []*pending[R, A]) {
	batch := make([]*pending[R, A], 0, len(gathered))
	var alone []*pending[R, A]
	seen := make(map[K]bool, len(gathered))
	for _, p := range gathered {
		if !p.state.CompareAndSwap(requestWaiting, requestTaken) {
			continue
		}
		if k := c.key(p.req); seen[k] {
			alone = append(alone, p)
		} else {
			seen[k] = true
			batch = append(batch, p)
		}
	}
	wctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), time.Now().Add(groupTimeout))
	defer cancel()
	if len(batch) > 0 {
		reqs := make([]R, len(batch))
		for i, p := range batch {
			reqs[i] = p.req
		}
		answers, err := c.write(wctx, reqs)
		if err == nil {
			c.batches.Add(1)
			c.written.Add(uint64(len(reqs)))
		}
		if err != nil && len(batch) > 1 && isDataError(err) {
			// A row the database refused: the others must not fail with it.
			alone = append(alone, batch...)
		} else {
			for i, p := range batch {
				if err != nil {
					p.done <- c.fail(err)
				} else {
					p.done <- answers[i]
				}
			}
		}
	}
	for _, p := range alone {
		a, err := c.write(wctx, []R{p.req})
		if err != nil {
			p.done <- c.fail(err)
			continue
		}
		c.batches.Add(1)
		c.written.Add(1)
		p.done <- a[0]
	}
}
