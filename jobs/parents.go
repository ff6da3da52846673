package jobs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// MaxParentsBytes bounds the parents' results one claim carries, in bytes
// of JSON. Results are passed smallest first until the next would pass the
// bound; each of the rest is passed as {"too_large": true, "bytes": N}
// instead, and asking for it (ParentResult) is a *ParentTooLargeError.
// A job whose parents returned more still runs: it reads what it needs of
// the larger ones through the API (GET /api/v1/jobs/{id}).
const MaxParentsBytes = 4 << 20

// BatchParent is the key under which a batch callback's parents hold the
// batch itself: {"id", "total", "counts"} (see BatchSummary).
const BatchParent = "batch"

// Parents are the results of a job's direct dependencies, as its claim
// read them: by step key for the jobs of its workflow, by job id for a
// dependency outside it. A dependency that returned no result maps to
// null. A batch callback's parents hold the batch under BatchParent and
// its members' results by member id.
type Parents map[string]json.RawMessage

// ErrNoParent is returned for a key that names none of the job's
// dependencies.
var ErrNoParent = errors.New("no such parent")

// ParentTooLargeError says that a parent's result was too large to pass
// with the claim (see MaxParentsBytes).
type ParentTooLargeError struct {
	Key   string // the parent's step key or job id
	Bytes int    // the size of its result
}

// Error names the parent and its size.
func (e *ParentTooLargeError) Error() string {
	return fmt.Sprintf("the result of parent %q is %d bytes, more than a claim carries (%d bytes of parents' results in all); read it with GET /api/v1/jobs/{id}",
		e.Key, e.Bytes, MaxParentsBytes)
}

// Keys returns the parents' keys, sorted.
func (p Parents) Keys() []string {
	out := make([]string, 0, len(p))
	for k := range p {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Raw returns the result of the parent named key, as JSON ("null" for a
// parent that returned none): ErrNoParent when the job has no such
// parent, a *ParentTooLargeError when the result was too large to pass.
func (p Parents) Raw(key string) (json.RawMessage, error) {
	r, ok := p[key]
	if !ok {
		known := p.Keys()
		if len(known) > 10 {
			known = append(known[:10], "…")
		}
		return nil, fmt.Errorf("%w %q (parents: %v)", ErrNoParent, key, known)
	}
	if n, big := tooLarge(r); big {
		return nil, &ParentTooLargeError{Key: key, Bytes: n}
	}
	return r, nil
}

// tooLarge recognises the marker a result too large to pass is replaced
// by, {"too_large": true, "bytes": N}.
func tooLarge(r json.RawMessage) (int, bool) {
	if !bytes.Contains(r, []byte(`"too_large"`)) {
		return 0, false
	}
	var m struct {
		TooLarge bool         `json:"too_large"`
		Bytes    *json.Number `json:"bytes"`
	}
	if json.Unmarshal(r, &m) != nil || !m.TooLarge || m.Bytes == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m.Bytes.String())
	return n, err == nil
}

type jobKey struct{}

// ContextWithJob returns ctx carrying the job its handler runs; the worker
// pool gives every handler one, which ParentsOf, ParentResult and Spawn
// read.
func ContextWithJob(ctx context.Context, j *Job) context.Context {
	return context.WithValue(ctx, jobKey{}, j)
}

// JobFrom returns the job ctx's handler runs, or nil outside a worker.
func JobFrom(ctx context.Context) *Job {
	j, _ := ctx.Value(jobKey{}).(*Job)
	return j
}

// ParentsOf returns the results of the running job's direct dependencies
// (nil for a job without any, or outside a worker).
func ParentsOf(ctx context.Context) Parents {
	if j := JobFrom(ctx); j != nil {
		return j.Parents
	}
	return nil
}

// ParentResult decodes the result of the running job's parent key (its
// step key in the workflow, or its job id) into a T. It fails with
// ErrNoParent for a key that names no dependency and with a
// *ParentTooLargeError for a result too large to pass with the claim.
func ParentResult[T any](ctx context.Context, key string) (T, error) {
	var v T
	raw, err := ParentsOf(ctx).Raw(key)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("the result of parent %q does not decode into %T: %w", key, v, err)
	}
	return v, nil
}

// BatchSummary is what a batch callback's parents hold under BatchParent.
type BatchSummary struct {
	ID     string         `json:"id"`
	Total  int            `json:"total"`
	Counts map[string]int `json:"counts"`
}

// BatchOf returns the batch a callback job was enqueued for, from its
// parents; ok is false for a job that is not a batch callback.
func BatchOf(ctx context.Context) (b BatchSummary, ok bool) {
	raw, err := ParentsOf(ctx).Raw(BatchParent)
	if err != nil {
		return b, false
	}
	return b, json.Unmarshal(raw, &b) == nil && b.ID != ""
}
