package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"github.com/flinthq/flint/internal/auth"
	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// registerRequest is the body of POST /api/v1/workers.
type registerRequest struct {
	Name        *string  `json:"name"`
	Types       []string `json:"types"`
	Queues      []string `json:"queues"`
	Concurrency *int     `json:"concurrency"`
	Language    *string  `json:"language"`
	Version     *string  `json:"version"`
	// Schemas are payload schemas by job type (of Types), stored with the
	// types so that every API process checks payloads against them.
	Schemas json.RawMessage `json:"schemas"`
}

// registerResponse answers a registration.
type registerResponse struct {
	ID               string   `json:"id"`
	HeartbeatSeconds float64  `json:"heartbeat_seconds"`
	LeaseSeconds     float64  `json:"lease_seconds"`
	Queues           []string `json:"queues"`
}

// textField checks an optional short text field.
func textField(name string, v *string, max int) (string, error) {
	if v == nil {
		return "", nil
	}
	if len(*v) > max || !jobs.CleanText(*v) {
		return "", invalid(name, fmt.Sprintf("must be text of at most %d characters without control characters", max))
	}
	return *v, nil
}

// registerWorker handles POST /api/v1/workers.
func (s *server) registerWorker(c *fiber.Ctx) error {
	var req registerRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	w, err := req.worker(c.IP(), s.clock.Now())
	if err != nil {
		return err
	}
	schemas, err := domain.ParseSchemas("schemas", req.Schemas, w.Types)
	if err != nil {
		return err
	}
	s.types.Reload(c.UserContext(), 0)
	if err := knownTypesRoom(s.types.Known(), w.Types); err != nil {
		return err
	}
	p, _ := principalOf(c)
	if w.Queues, err = keyQueues(p, w.Queues); err != nil {
		return err
	}
	if p.keyID != uuid.Nil {
		id := p.keyID
		w.KeyID = &id
	}
	id, err := uuid.NewV7()
	if err != nil {
		return err
	}
	w.ID = id.String()
	// The schemas are in force, here at once, before the worker shows
	// in the registry: whoever sees it there can count on them.
	if len(schemas) > 0 {
		if _, err := s.typeStore.RecordSchemas(c.UserContext(), schemas, domain.SchemaAuthor{Source: domain.SchemaFromRemote,
			WorkerID: w.ID, WorkerName: w.Name, Language: w.Language, WorkerVersion: w.Version}); err != nil {
			return err
		}
		s.types.Reload(c.UserContext(), 0)
	}
	wa := s.work
	if _, err := wa.cfg.Store.WorkerHeartbeat(c.UserContext(), w, remoteWorkerTTL*wa.cfg.HeartbeatInterval); err != nil {
		return err
	}
	wa.cache.Store(w.ID, cachedWorker{info: w, at: time.Now()})
	// The catalog was loaded just above, before these types were served:
	// load it again so that a job of them enqueued next is accepted here.
	s.types.Reload(c.UserContext(), 0)
	queues := w.Queues
	if queues == nil {
		queues = []string{}
	}
	return c.Status(http.StatusCreated).JSON(registerResponse{ID: w.ID, HeartbeatSeconds: wa.cfg.HeartbeatInterval.Seconds(),
		LeaseSeconds: wa.cfg.LeaseTTL.Seconds(), Queues: queues})
}

// worker validates the registration into the registry entry of a new
// remote worker on host; the caller gives it its id and key.
func (r registerRequest) worker(host string, now time.Time) (domain.WorkerInfo, error) {
	w := domain.WorkerInfo{Kind: domain.WorkerRemote, Host: host, StartedAt: now, State: domain.WorkerRunning, Concurrency: 1}
	var err error
	if w.Name, err = textField("name", r.Name, 100); err != nil {
		return w, err
	}
	if w.Language, err = textField("language", r.Language, 32); err != nil {
		return w, err
	}
	if w.Version, err = textField("version", r.Version, 64); err != nil {
		return w, err
	}
	if r.Concurrency != nil {
		if *r.Concurrency < 1 || *r.Concurrency > 10000 {
			return w, invalid("concurrency", "must be between 1 and 10000: how many jobs the worker runs at once")
		}
		w.Concurrency = *r.Concurrency
	}
	if w.Types, err = workerTypes(r.Types); err != nil {
		return w, err
	}
	if err := checkWorkerQueues(r.Queues); err != nil {
		return w, err
	}
	w.Queues = r.Queues
	return w, nil
}

// workerTypes checks the job types a worker says it runs and returns them
// sorted.
func workerTypes(types []string) ([]string, error) {
	if len(types) == 0 {
		return nil, invalid("types", "name the job types this worker runs (at least one)")
	}
	if len(types) > maxWorkerTypes {
		return nil, invalid("types", fmt.Sprintf("lists %d types; the limit is %d", len(types), maxWorkerTypes))
	}
	for i, t := range types {
		if !jobs.ValidType(t) {
			return nil, invalid(fmt.Sprintf("types[%d]", i), fmt.Sprintf("%q is not a job type: 1-%d letters, digits or _ . : / -", t, jobs.MaxTypeLen))
		}
		if slices.Contains(types[:i], t) {
			return nil, invalid(fmt.Sprintf("types[%d]", i), fmt.Sprintf("%q is listed twice", t))
		}
	}
	return slices.Sorted(slices.Values(types)), nil
}

// knownTypesRoom refuses a registration whose new types would take the
// job types Flint knows past domain.MaxKnownTypes: every one of them is
// offered to whoever enqueues, so a work key must not grow the list
// without bound. Types no worker served for 24 hours are forgotten.
func knownTypesRoom(known, types []string) error {
	added := 0
	for _, t := range types {
		if _, found := slices.BinarySearch(known, t); !found {
			added++
		}
	}
	if added > 0 && len(known)+added > domain.MaxKnownTypes {
		return &apiError{Status: http.StatusConflict, Code: "too_many_types", Field: "types",
			Message: fmt.Sprintf("Flint knows %d job types and this worker would add %d; the limit is %d. "+
				"Types no worker has served for 24 hours are forgotten; serve fewer types per worker", len(known), added, domain.MaxKnownTypes)}
	}
	return nil
}

// checkWorkerQueues checks the queues a worker says it serves (none: every
// queue).
func checkWorkerQueues(queues []string) error {
	if len(queues) > maxWorkerQueues {
		return invalid("queues", fmt.Sprintf("lists %d queues; the limit is %d", len(queues), maxWorkerQueues))
	}
	for i, q := range queues {
		if !jobs.ValidQueue(q) {
			return invalid(fmt.Sprintf("queues[%d]", i), fmt.Sprintf("%q is not a queue name: 1-%d letters, digits or _ . : -", q, jobs.MaxQueueLen))
		}
		if slices.Contains(queues[:i], q) {
			return invalid(fmt.Sprintf("queues[%d]", i), fmt.Sprintf("%q is listed twice", q))
		}
	}
	return nil
}

// keyQueues returns the queues a worker registered by p serves: those it
// asked for, each of which p's key must be allowed to work, or every queue
// the key may work when it asked for none.
func keyQueues(p principal, queues []string) ([]string, error) {
	if p.queues == nil {
		return queues, nil
	}
	if len(queues) == 0 {
		queues = p.queues // every queue the key may work
	}
	for i, q := range queues {
		if !slices.Contains(p.queues, q) {
			return nil, &apiError{Status: http.StatusForbidden, Code: "forbidden", Field: fmt.Sprintf("queues[%d]", i), Scope: string(auth.ScopeWork),
				Message: fmt.Sprintf("this key may work only the queues %v, not %q", p.queues, q)}
		}
	}
	return queues, nil
}

// worker returns the remote worker of the request's path, refusing a
// caller other than the key that registered it (or an admin).
func (s *server) worker(c *fiber.Ctx) (domain.WorkerInfo, error) {
	return s.workerWithin(c.UserContext(), c)
}

// workerWithin is worker reading the registry within ctx.
func (s *server) workerWithin(ctx context.Context, c *fiber.Ctx) (domain.WorkerInfo, error) {
	id := c.Params("id")
	if len(id) > 200 {
		return domain.WorkerInfo{}, badRequest("invalid_id", "id", "the worker id in the path is too long")
	}
	wa := s.work
	var w domain.WorkerInfo
	if v, ok := wa.cache.Load(id); ok && time.Since(v.(cachedWorker).at) < workerCacheTTL {
		w = v.(cachedWorker).info
	} else {
		var err error
		if w, err = wa.cfg.Store.GetWorker(ctx, id); err != nil {
			if errors.Is(err, domain.ErrNotFound) {
				wa.cache.Delete(id)
				return w, &apiError{Status: http.StatusNotFound, Code: "not_found",
					Message: "no such worker: it deregistered or was never registered; register again (POST /api/v1/workers)"}
			}
			return w, err
		}
		wa.cache.Store(id, cachedWorker{info: w, at: time.Now()})
	}
	if w.Kind != domain.WorkerRemote {
		return w, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "no such remote worker: " + id + " is a Flint process"}
	}
	p, _ := principalOf(c)
	owner := uuid.Nil
	if w.KeyID != nil {
		owner = *w.KeyID
	}
	if p.keyID != owner && !auth.Grants(p.scopes, auth.ScopeAdmin) {
		return w, &apiError{Status: http.StatusForbidden, Code: "forbidden", Scope: string(auth.ScopeWork),
			Message: "this worker was registered with another key; only that key may act for it"}
	}
	return w, nil
}

// deregisterWorker handles DELETE /api/v1/workers/{id}: the jobs the
// worker holds go back to their queues at once, without charging an
// attempt, and it leaves the registry.
func (s *server) deregisterWorker(c *fiber.Ctx) error {
	w, err := s.worker(c)
	if err != nil {
		return err
	}
	wa := s.work
	moved, err := wa.cfg.Store.ReleaseWorker(c.UserContext(), w.ID, "interrupted: worker "+w.ID+" stopped before the job finished")
	if err != nil {
		return err
	}
	wa.cache.Delete(w.ID)
	wa.cfg.Hub.Kick(w.ID)
	return c.JSON(fiber.Map{"released": len(moved)})
}

// workerStateAPI handles POST /api/v1/workers/{id}/quiet and /terminate:
// an operator asks a remote worker to stop claiming, or to stop; it
// learns on its next heartbeat.
func (s *server) workerStateAPI(state string) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id := c.Params("id")
		if err := s.work.cfg.Store.SetWorkerState(c.UserContext(), id, state); err != nil {
			return err
		}
		s.work.cache.Delete(id)
		s.work.cfg.Hub.Kick(id)
		s.audit(c, "worker_"+state, map[string]any{"worker_id": id})
		return c.JSON(fiber.Map{"id": id, "state": state})
	}
}
