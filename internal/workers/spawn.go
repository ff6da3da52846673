package workers

import (
	"fmt"
	"time"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// Spawn keeps jobs the handler adds to its workflow, refusing a key it
// spawned already and more than jobs.MaxSpawnJobs in all.
func (h handlerContext) Spawn(list []jobs.Spawned) error {
	ex := h.ex
	ex.spawnMu.Lock()
	defer ex.spawnMu.Unlock()
	if n := len(ex.spawned) + len(list); n > jobs.MaxSpawnJobs {
		return fmt.Errorf("%d jobs in this attempt; the limit is %d", n, jobs.MaxSpawnJobs)
	}
	keys := make(map[string]bool, len(ex.spawned)+len(list))
	for _, sp := range ex.spawned {
		keys[sp.Key] = true
	}
	for _, sp := range list {
		if keys[sp.Key] {
			return fmt.Errorf("key %q is spawned twice", sp.Key)
		}
		keys[sp.Key] = true
	}
	if ex.spawned == nil {
		// The list is the caller's to give (jobs.Spawn made it): a
		// fan-out of 10,000 is 3 MB that need not be copied.
		ex.spawned = list
		return nil
	}
	ex.spawned = append(ex.spawned, list...)
	return nil
}

// SpawnTypes is what spawned jobs may name.
func (h handlerContext) SpawnTypes() jobs.TypeSource {
	if h.p.cfg.Types != nil {
		return h.p.cfg.Types
	}
	return h.p.registry
}

// Now is the pool's clock.
func (h handlerContext) Now() time.Time { return time.Now() }

// takeSpawned is what the handler spawned, checked as a whole; a list
// that does not hold together fails the job for good.
func (ex *execution) takeSpawned(f *domain.Finish) {
	ex.spawnMu.Lock()
	list := ex.spawned
	ex.spawned = nil
	ex.spawnMu.Unlock()
	if len(list) == 0 || f.Outcome != domain.OutcomeSucceeded {
		return
	}
	if err := domain.CheckSpawnGraph(list); err != nil {
		f.Outcome, f.Result, f.Final = domain.OutcomeFailed, nil, true
		f.Error = "spawn refused: " + err.Error()
		return
	}
	f.Spawn = list
}
