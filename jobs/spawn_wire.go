package jobs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
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
func ParseSpawn(raw json.RawMessage, types TypeSource, now time.Time) ([]Spawned, error) {
	var entries []json.RawMessage
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, Invalid("spawn", "must be a list of jobs: %s", err.Error())
	}
	if len(entries) > MaxSpawnJobs {
		return nil, Invalid("spawn", "holds %d jobs; the limit is %d per attempt", len(entries), MaxSpawnJobs)
	}
	out := make([]Spawned, len(entries))
	for i, e := range entries {
		at := fmt.Sprintf("spawn[%d]", i)
		sp, err := parseSpawnEntry(e, types, now)
		if err != nil {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return nil, Invalid(at+"."+ve.Field, "%s", ve.Message)
			}
			return nil, Invalid(at, "%s", err.Error())
		}
		out[i] = sp
	}
	if err := CheckSpawnGraph(out); err != nil {
		return nil, err
	}
	return out, nil
}

// parseSpawnEntry decodes and checks one entry.
func parseSpawnEntry(raw json.RawMessage, types TypeSource, now time.Time) (Spawned, error) {
	var w SpawnWire
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		if f, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return Spawned{}, Invalid(strings.Trim(f, `"`), "is not a field of a spawned job")
		}
		return Spawned{}, fmt.Errorf("must be a job object: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Spawned{}, errors.New("must be one job object")
	}
	p := EnqueueParams{Type: w.Type, Queue: w.Queue, Payload: w.Payload, MaxRetries: w.MaxRetries, ConcurrencyKey: w.ConcurrencyKey}
	if len(w.Priority) > 0 && string(w.Priority) != "null" {
		prio, ok := priorityFromJSON(w.Priority)
		if !ok {
			return Spawned{}, Invalid("priority", `must be 1, 2, 3, "high", "medium" or "low"`)
		}
		p.Priority = prio
	}
	if w.TimeoutSeconds != nil {
		if *w.TimeoutSeconds < 1 {
			return Spawned{}, Invalid("timeout_seconds", "must be between 1 and %d (or omitted for none)", MaxTimeoutSeconds)
		}
		p.TimeoutSeconds = *w.TimeoutSeconds
	}
	if w.DelaySeconds != nil {
		d := *w.DelaySeconds
		if math.IsNaN(d) || d < 0 || d > MaxDelay.Seconds() {
			return Spawned{}, Invalid("delay_seconds", "must be between 0 and %d", int64(MaxDelay.Seconds()))
		}
		p.Delay = time.Duration(d * float64(time.Second))
	}
	sp := Spawned{Key: w.Key, DependsOn: w.DependsOn, Params: p}
	return sp, CheckSpawned(&sp, types, now)
}

// PriorityByName maps a priority given as text ("high", "medium", "low"
// or "1" to "3", any case) to its number.
func PriorityByName(s string) (int, bool) {
	switch strings.ToLower(s) {
	case "high", "1":
		return PriorityHigh, true
	case "medium", "2":
		return PriorityMedium, true
	case "low", "3":
		return PriorityLow, true
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
	if json.Unmarshal(raw, &n) != nil || n < PriorityHigh || n > PriorityLow {
		return 0, false
	}
	return n, true
}
