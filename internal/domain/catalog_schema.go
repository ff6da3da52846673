package domain

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/flinthq/flint/jobs"
)

// SchemaStore reads the payload schemas stored with the job types.
type SchemaStore interface {
	// SchemaHashes returns the hash of each type's current schema.
	SchemaHashes(ctx context.Context) (map[string]string, error)
	// SchemaTexts returns the current schemas of types.
	SchemaTexts(ctx context.Context, types []string) (map[string]json.RawMessage, error)
}

// SchemaMaxAge is how long, at most, a Catalog validates with schemas
// it loaded before it loads them again; a change is normally heard at
// once (Invalidate, on a notification from PostgreSQL).
const SchemaMaxAge = 10 * time.Second

// UseSchemas makes the catalog load payload schemas from store with the
// served types, and check payloads against them. Call it before the
// catalog is used.
func (c *Catalog) UseSchemas(store SchemaStore) {
	c.schemaStore = store
	empty := map[string]*jobs.PayloadSchema{}
	c.schemas.Store(&empty)
}

// Invalidate makes the next Prepare load the served types and schemas
// again (a worker registered, a schema changed).
func (c *Catalog) Invalidate() { c.stale.Store(true) }

// Schema returns jobType's payload schema as last loaded, or nil.
func (c *Catalog) Schema(jobType string) *jobs.PayloadSchema {
	m := c.schemas.Load()
	if m == nil {
		return nil
	}
	return (*m)[jobType]
}

// fresh reports whether the schemas need no reload before a payload is
// checked against them.
func (c *Catalog) fresh() bool {
	if c.schemaStore == nil {
		return true
	}
	at := c.loadedNanos.Load()
	return at != 0 && !c.stale.Load() && time.Since(time.Unix(0, at)) < SchemaMaxAge
}

// loadSchemas brings the compiled schemas up to date with the store:
// only those whose hash changed are read and compiled again. A schema
// that no longer compiles (a stricter limit in a newer Flint) is dropped:
// it is not enforced rather than refusing every enqueue of its type.
func (c *Catalog) loadSchemas(ctx context.Context) error {
	if c.schemaStore == nil {
		return nil
	}
	hashes, err := c.schemaStore.SchemaHashes(ctx)
	if err != nil {
		return err
	}
	old := *c.schemas.Load()
	next := make(map[string]*jobs.PayloadSchema, len(hashes))
	var changed []string
	for t, h := range hashes {
		if s, ok := old[t]; ok && s.Hash == h {
			next[t] = s
			continue
		}
		changed = append(changed, t)
	}
	if len(changed) > 0 {
		texts, err := c.schemaStore.SchemaTexts(ctx, changed)
		if err != nil {
			return err
		}
		for t, text := range texts {
			if s, err := jobs.CompileSchema(text); err == nil {
				next[t] = s
			}
		}
	}
	c.schemas.Store(&next)
	return nil
}

// Schema returns the schema of jobType when the prepared source holds
// schemas.
func (p prepared) Schema(jobType string) *jobs.PayloadSchema {
	if s, ok := p.Preparer.(jobs.SchemaSource); ok {
		return s.Schema(jobType)
	}
	return nil
}

// Where a schema came from (SchemaAuthor.Source).
const (
	SchemaFromProcess = "process" // a Go handler in a Flint process
	SchemaFromRemote  = "remote"  // a pull worker's registration
	SchemaFromQueue   = "queue"   // a push queue's settings
)

// SchemaAuthor says who stored a version of a type's schema.
type SchemaAuthor struct {
	Source        string `json:"source"` // SchemaFromProcess, SchemaFromRemote or SchemaFromQueue
	WorkerID      string `json:"worker_id,omitempty"`
	WorkerName    string `json:"worker_name,omitempty"`
	Language      string `json:"language,omitempty"`
	WorkerVersion string `json:"worker_version,omitempty"`
	Queue         string `json:"queue,omitempty"` // the push queue whose settings gave it
}

// SchemaVersion is one version of a type's payload schema.
type SchemaVersion struct {
	Type      string          `json:"type"`
	Version   int             `json:"version"`
	Schema    json.RawMessage `json:"schema"`
	Hash      string          `json:"hash"`
	By        SchemaAuthor    `json:"by"`
	CreatedAt time.Time       `json:"created_at"`
}

// MaxSchemasPerRequest caps the schemas one registration or push queue
// setting may carry (a remote worker serves at most 200 types).
const MaxSchemasPerRequest = 200

// ParseSchemas checks the "schemas" member of a request, field (a
// worker's registration, a push queue's settings): an object of job type
// to JSON Schema, each type one of types when types is not nil. It
// compiles every schema and returns a *ValidationError naming the one at
// fault (field.<type>).
func ParseSchemas(field string, raw json.RawMessage, types []string) (map[string]*jobs.PayloadSchema, error) {
	if len(raw) == 0 || isNull(raw) {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, jobs.Invalid(field, `must be an object of job type to JSON Schema, such as {"resize": {"type": "object"}}`)
	}
	if len(m) > MaxSchemasPerRequest {
		return nil, jobs.Invalid(field, "gives %d schemas; the limit is %d", len(m), MaxSchemasPerRequest)
	}
	out := make(map[string]*jobs.PayloadSchema, len(m))
	for t, text := range m {
		f := field + "." + t
		if !jobs.ValidType(t) {
			return nil, jobs.Invalid(f, "%q is not a job type", t)
		}
		if types != nil && !slices.Contains(types, t) {
			return nil, jobs.Invalid(f, "gives a schema for %s, which types does not list", t)
		}
		sch, err := jobs.CompileSchema(text)
		if err != nil {
			return nil, jobs.Invalid(f, "%s", err.Error())
		}
		out[t] = sch
	}
	return out, nil
}
