package domain

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flinthq/flint/jobs"
)

// ServedTypesFunc returns the job types workers (in-process or remote)
// have said they serve within the last ServedTypesWindow.
type ServedTypesFunc func(ctx context.Context) ([]string, error)

// ServedTypesWindow is how long a type stays accepted after the last
// worker that serves it was seen.
const ServedTypesWindow = 24 * time.Hour

// catalogRefresh is how often, at most, a Catalog reloads the served
// types when asked about a type it does not know.
const catalogRefresh = time.Second

// Catalog is the set of job types the API accepts: those with a handler
// in this process (the registry), those a worker seen within
// ServedTypesWindow serves (in another process or a remote worker), and
// those named in the configuration (FLINT_JOB_TYPES), whose workers may
// not have started yet. Anything else is refused at enqueue with the
// list of known types, so a typo never becomes a job nobody runs.
//
// The served types are loaded through a function (the store) and cached;
// Prepare reloads them, at most once a second, when a request names a
// type the cache does not know, so a worker that has just registered is
// accepted within a second.
type Catalog struct {
	registry *jobs.Registry
	extra    []string
	load     ServedTypesFunc
	pushed   func(queue string) bool

	served      atomic.Pointer[[]string] // sorted
	mu          sync.Mutex               // one load at a time
	loadedAt    time.Time
	loadedNanos atomic.Int64 // loadedAt, for readers without mu

	schemaStore SchemaStore
	schemas     atomic.Pointer[map[string]*jobs.PayloadSchema]
	stale       atomic.Bool // Invalidate was called since the last load
}

// NewCatalog returns the catalog of registry's types, extra (sorted or
// not) and what load returns; load nil means no types served elsewhere.
func NewCatalog(registry *jobs.Registry, extra []string, load ServedTypesFunc) *Catalog {
	c := &Catalog{registry: registry, load: load}
	for _, t := range extra {
		if !slices.Contains(c.extra, t) {
			c.extra = append(c.extra, t)
		}
	}
	slices.Sort(c.extra)
	return c
}

// Lookup returns the handler for jobType in this process, if any.
func (c *Catalog) Lookup(jobType string) (jobs.Handler, bool) { return c.registry.Lookup(jobType) }

// PushQueues tells the catalog which queues push their jobs to an HTTP
// endpoint: any type may be enqueued into one (the endpoint serves the
// whole queue). Call it before the catalog is used.
func (c *Catalog) PushQueues(pushed func(queue string) bool) { c.pushed = pushed }

// Accepts reports whether jobType is registered here, configured, or
// served by a worker seen lately (as of the last load), or queue pushes
// its jobs to an endpoint.
func (c *Catalog) Accepts(jobType, queue string) bool {
	if c.registry.Accepts(jobType, queue) || (c.pushed != nil && c.pushed(queue)) {
		return true
	}
	if _, ok := slices.BinarySearch(c.extra, jobType); ok {
		return true
	}
	if s := c.served.Load(); s != nil {
		_, ok := slices.BinarySearch(*s, jobType)
		return ok
	}
	return false
}

// Known returns every accepted type, sorted.
func (c *Catalog) Known() []string {
	out := append(c.registry.Types(), c.extra...)
	if s := c.served.Load(); s != nil {
		out = append(out, *s...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Prepare makes sure the catalog is current for a job of jobType in
// queue ("" for the default queue): if it is not accepted, it reloads the
// served types unless it did so within the last second. A failed load
// keeps the last known set.
func (c *Catalog) Prepare(ctx context.Context, jobType, queue string) {
	if c.load == nil {
		return
	}
	if c.Accepts(jobType, cmp.Or(queue, jobs.DefaultQueue)) && c.served.Load() != nil && c.fresh() {
		return
	}
	if c.stale.Load() {
		c.Reload(ctx, 0)
		return
	}
	c.Reload(ctx, catalogRefresh)
}

// Reload loads the served types unless they were loaded within maxAge.
func (c *Catalog) Reload(ctx context.Context, maxAge time.Duration) {
	if c.load == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.loadedAt.IsZero() && time.Since(c.loadedAt) < maxAge && !c.stale.Load() {
		return
	}
	stale := c.stale.Swap(false)
	types, err := c.load(ctx)
	if err == nil {
		err = c.loadSchemas(ctx)
	}
	if err != nil {
		if stale {
			c.stale.Store(true)
		}
		return // keep what we had; the next unknown type tries again
	}
	c.loadedAt = time.Now()
	c.loadedNanos.Store(c.loadedAt.UnixNano())
	types = slices.Clone(types)
	slices.Sort(types)
	types = slices.Compact(types)
	c.served.Store(&types)
}

// Preparer is a TypeSource that may need bringing up to date before it is
// asked about a type (*Catalog).
type Preparer interface {
	jobs.TypeSource
	// Prepare makes the source current for a job of jobType in queue.
	Prepare(ctx context.Context, jobType, queue string)
}

// Prepared returns t as a TypeSource that prepares it (with ctx) for each
// type it is asked to accept: for checks of many jobs, such as the jobs a
// handler spawns, whose types are not known in advance.
func Prepared(ctx context.Context, t Preparer) jobs.TypeSource { return prepared{t, ctx} }

type prepared struct {
	Preparer
	ctx context.Context
}

func (p prepared) Accepts(jobType, queue string) bool {
	p.Prepare(p.ctx, jobType, queue)
	return p.Preparer.Accepts(jobType, queue)
}
