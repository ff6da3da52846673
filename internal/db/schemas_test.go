package db_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

func compiled(t *testing.T, raw string) *jobs.PayloadSchema {
	t.Helper()
	s, err := jobs.CompileSchema(json.RawMessage(raw))
	require.NoError(t, err)
	return s
}

// TestRecordSchemasKeepsVersions: the same schema records nothing, a
// different one adds a version with who gave it, the catalog reads the
// one in force, and the history keeps the last 50 versions.
func TestRecordSchemasKeepsVersions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	v1 := compiled(t, `{"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}`)
	by := domain.SchemaAuthor{Source: domain.SchemaFromRemote, WorkerID: "w1", WorkerName: "reports", Language: "python", WorkerVersion: "1.0"}
	changed, err := b.store.RecordSchemas(b.ctx, map[string]*jobs.PayloadSchema{"report": v1, "other": v1}, by)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"report", "other"}, changed)
	changed, err = b.store.RecordSchemas(b.ctx, map[string]*jobs.PayloadSchema{"report": v1}, by)
	require.NoError(t, err)
	require.Empty(t, changed, "the same schema again is no change")

	v2 := compiled(t, `{"type": "object", "required": ["a"], "properties": {"a": {"type": "string"}}}`)
	by.WorkerVersion = "2.0"
	changed, err = b.store.RecordSchemas(b.ctx, map[string]*jobs.PayloadSchema{"report": v2}, by)
	require.NoError(t, err)
	require.Equal(t, []string{"report"}, changed)

	hashes, err := b.store.SchemaHashes(b.ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"report": v2.Hash, "other": v1.Hash}, hashes)
	texts, err := b.store.SchemaTexts(b.ctx, []string{"report"})
	require.NoError(t, err)
	require.Equal(t, string(v2.Text), string(texts["report"]), "kept as given, keys in order")
	hist, err := b.store.SchemaHistory(b.ctx, "report")
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Equal(t, 2, hist[0].Version)
	require.Equal(t, "2.0", hist[0].By.WorkerVersion)
	require.Equal(t, `{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}}`, string(hist[1].Schema))

	for i := range 60 {
		s := compiled(t, fmt.Sprintf(`{"type": "object", "maxProperties": %d}`, i+1))
		_, err := b.store.RecordSchemas(b.ctx, map[string]*jobs.PayloadSchema{"report": s}, by)
		require.NoError(t, err)
	}
	hist, err = b.store.SchemaHistory(b.ctx, "report")
	require.NoError(t, err)
	require.Len(t, hist, 50)
	require.Equal(t, 62, hist[0].Version)
}

// TestCatalogChecksStoredSchemas: a catalog with the store refuses a
// payload that does not fit its type's stored schema, and hears of a
// change once invalidated.
func TestCatalogChecksStoredSchemas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c := domain.NewCatalog(jobs.NewRegistry(), []string{"report"}, b.store.ServedTypes)
	c.UseSchemas(b.store)
	check := func(payload string) error {
		p := jobs.EnqueueParams{Type: "report", Payload: json.RawMessage(payload)}
		c.Prepare(b.ctx, p.Type, p.Queue)
		return p.Validate(c, time.Now())
	}
	require.NoError(t, check(`{"a": 1}`), "no schema yet")
	_, err := b.store.RecordSchemas(b.ctx, map[string]*jobs.PayloadSchema{"report": compiled(t, `{"properties": {"a": {"type": "string"}}}`)},
		domain.SchemaAuthor{Source: domain.SchemaFromQueue, Queue: "hooks"})
	require.NoError(t, err)
	c.Invalidate() // as the notification does
	err = check(`{"a": 1}`)
	var ve *jobs.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "payload.a", ve.Field)
	require.NoError(t, check(`{"a": "x"}`))
}
