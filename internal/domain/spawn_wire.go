package domain

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/flinthq/flint/jobs"
)

// SpawnWire is one entry of a "spawn" list on the wire (a pull worker's
// finish outcome, a push endpoint's 2xx answer): the fields of SPEC's
// "Growing a workflow", plus the enqueue options a spawned job may take.
type SpawnWire struct {
	Key            string          `json:"key"`
	Type           string          `json:"type"`
	Payload        json.RawMessage `json:"payload"`
	Queue          string          `json:"queue"`
	Priority       json.RawMessage `json:"priority"`
	DependsOn      []string        `json:"depends_on"`
	MaxRetries     *int            `json:"max_retries"`
	TimeoutSeconds *int            `json:"timeout_seconds"`
	ConcurrencyKey string          `json:"concurrency_key"`
	DelaySeconds   *float64        `json:"delay_seconds"`
}

// ParseSpawn reads a wire "spawn" list (raw is the JSON array) into
// checked jobs: each entry as CheckSpawned checks it, the list as
// CheckSpawnGraph does. Errors are *ValidationError with fields relative
// to the list ("spawn[2].type").
func ParseSpawn(raw json.RawMessage, types jobs.TypeSource, now time.Time) ([]jobs.Spawned, error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, jobs.Invalid("spawn", "must be a list of jobs: %s", err.Error())
	}
	if len(entries) > jobs.MaxSpawnJobs {
		return nil, jobs.Invalid("spawn", "holds %d jobs; the limit is %d per attempt", len(entries), jobs.MaxSpawnJobs)
	}
	out := make([]jobs.Spawned, len(entries))
	for i, e := range entries {
		at := fmt.Sprintf("spawn[%d]", i)
		sp, err := parseSpawnEntry(e, types, now)
		if err != nil {
			var ve *jobs.ValidationError
			if errors.As(err, &ve) {
				return nil, jobs.Invalid(at+"."+ve.Field, "%s", ve.Message)
			}
			return nil, jobs.Invalid(at, "%s", err.Error())
		}
		out[i] = sp
	}
	if err := CheckSpawnGraph(out); err != nil {
		return nil, err
	}
	return out, nil
}

// parseSpawnEntry decodes and checks one entry.
func parseSpawnEntry(raw json.RawMessage, types jobs.TypeSource, now time.Time) (jobs.Spawned, error) {
	var w SpawnWire
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return jobs.Spawned{}, jobs.Invalid(strings.Trim(f, `"`), "is not a field of a spawned job")
		}
		return jobs.Spawned{}, fmt.Errorf("must be a job object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jobs.Spawned{}, errors.New("must be one job object")
	}
	p := jobs.EnqueueParams{Type: w.Type, Queue: w.Queue, Payload: w.Payload, MaxRetries: w.MaxRetries, ConcurrencyKey: w.ConcurrencyKey}
	if len(w.Priority) > 0 && string(w.Priority) != "null" {
		prio, ok := priorityFromJSON(w.Priority)
		if !ok {
			return jobs.Spawned{}, jobs.Invalid("priority", `must be 1, 2, 3, "high", "medium" or "low"`)
		}
		p.Priority = prio
	}
	if w.TimeoutSeconds != nil {
		if *w.TimeoutSeconds < 1 {
			return jobs.Spawned{}, jobs.Invalid("timeout_seconds", "must be between 1 and %d (or omitted for none)", jobs.MaxTimeoutSeconds)
		}
		p.TimeoutSeconds = *w.TimeoutSeconds
	}
	if w.DelaySeconds != nil {
		d := *w.DelaySeconds
		if math.IsNaN(d) || d < 0 || d > jobs.MaxDelay.Seconds() {
			return jobs.Spawned{}, jobs.Invalid("delay_seconds", "must be between 0 and %d", int64(jobs.MaxDelay.Seconds()))
		}
		p.Delay = time.Duration(d * float64(time.Second))
	}
	sp := jobs.Spawned{Key: w.Key, DependsOn: w.DependsOn, Params: p}
	return sp, jobs.CheckSpawned(&sp, types, now)
}

// PriorityByName maps a priority given as text ("high", "medium", "low"
// or "1" to "3", any case) to its number.
func PriorityByName(s string) (int, bool) {
	switch strings.ToLower(s) {
	case "high", "1":
		return jobs.PriorityHigh, true
	case "medium", "2":
		return jobs.PriorityMedium, true
	case "low", "3":
		return jobs.PriorityLow, true
	}
	return 0, false
}

// priorityFromJSON reads a priority given as a JSON number or string.
func priorityFromJSON(raw json.RawMessage) (int, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return PriorityByName(s)
	}
	var n int
	if json.Unmarshal(raw, &n) != nil || n < jobs.PriorityHigh || n > jobs.PriorityLow {
		return 0, false
	}
	return n, true
}
