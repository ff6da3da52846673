package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Handler runs jobs of one type. Work receives a context that is cancelled
// when the job is cancelled, times out, loses its lease or the process
// drains; long-running handlers must watch it. The returned result, if not
// nil, is stored as the job's JSON result. Returning an error fails the
// attempt (it is retried while retries are left); returning Permanent(err)
// fails the job for good (straight to the dead-letter queue), and
// Cancel(err) cancels it. A panic fails the attempt with the stack trace.
type Handler interface {
	// Work runs one attempt of job. It may be called for several jobs at
	// once, from several goroutines.
	Work(ctx context.Context, job *Job) (result any, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, job *Job) (any, error)

// Work calls f.
func (f HandlerFunc) Work(ctx context.Context, job *Job) (any, error) { return f(ctx, job) }

// PayloadValidator is implemented by handlers that can reject a payload at
// enqueue time, so the caller gets a 4xx instead of a job doomed to fail.
type PayloadValidator interface {
	// ValidatePayload returns an error, best a *ValidationError naming the
	// payload field, if payload could never run.
	ValidatePayload(payload json.RawMessage) error
}

// Registry maps job types to handlers. It is safe for concurrent use;
// registration normally happens once at start-up.
type Registry struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry { return &Registry{handlers: map[string]Handler{}} }

// Register adds h for jobType. It panics on an invalid or duplicate type,
// which is a programming error caught at start-up.
func (r *Registry) Register(jobType string, h Handler) {
	if !ValidType(jobType) {
		panic(fmt.Sprintf("jobs: invalid job type %q", jobType))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[jobType]; dup {
		panic(fmt.Sprintf("jobs: job type %q registered twice", jobType))
	}
	r.handlers[jobType] = h
}

// Lookup returns the handler for jobType.
func (r *Registry) Lookup(jobType string) (Handler, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.handlers[jobType]
	return h, ok
}

// Types returns the registered types, sorted.
func (r *Registry) Types() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.handlers))
	for t := range r.handlers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// TypeList returns the registered types as a comma-separated list.
func (r *Registry) TypeList() string { return strings.Join(r.Types(), ", ") }
