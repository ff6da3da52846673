package db

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/flinthq/flint/internal/domain"
	"github.com/flinthq/flint/jobs"
)

// ChannelTypes carries a job type's name whenever its payload schema
// changes, so that every API process checks payloads against the new one
// at once (domain.Catalog.Invalidate).
const ChannelTypes = "flint_types"

// maxSchemaVersions is how many versions of a type's schema are kept.
const maxSchemaVersions = 50

// recordSchemasSQL adds a version for each type whose schema in force
// differs from the one given ($1 types, $2 schemas, $3 hashes), trims
// the history, and tells every process. Two processes recording at once
// cannot both add the same version: the second changes nothing.
var recordSchemasSQL = `
WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) AS i(type, schema, hash)
),
cur AS (
	SELECT DISTINCT ON (s.type) s.type, s.hash, s.version
	FROM job_type_schemas s JOIN input USING (type)
	ORDER BY s.type, s.version DESC
),
ins AS (
	INSERT INTO job_type_schemas (type, version, schema, hash, source, worker_id, worker_name, language, worker_version, queue)
	SELECT i.type, coalesce(cur.version, 0) + 1, i.schema::json, i.hash, $4, $5, $6, $7, $8, $9
	FROM input i LEFT JOIN cur USING (type)
	WHERE cur.hash IS DISTINCT FROM i.hash
	ON CONFLICT DO NOTHING
	RETURNING type, version
),
trimmed AS (
	DELETE FROM job_type_schemas d USING ins
	WHERE d.type = ins.type AND d.version <= ins.version - ` + strconv.Itoa(maxSchemaVersions) + `
)
SELECT ins.type FROM ins, LATERAL (SELECT pg_notify('` + ChannelTypes + `', ins.type)) n`

// RecordSchemas stores schemas (compiled, by type) as the ones in force
// for their types, by whom, and returns the types whose schema changed.
func (s *Store) RecordSchemas(ctx context.Context, schemas map[string]*jobs.PayloadSchema, by domain.SchemaAuthor) ([]string, error) {
	if len(schemas) == 0 {
		return nil, nil
	}
	types := make([]string, 0, len(schemas))
	texts := make([]string, 0, len(schemas))
	hashes := make([]string, 0, len(schemas))
	for t, sch := range schemas {
		types = append(types, t)
		texts = append(texts, string(sch.Text))
		hashes = append(hashes, sch.Hash)
	}
	rows, err := s.pool.Query(ctx, recordSchemasSQL, types, texts, hashes, by.Source, by.WorkerID, by.WorkerName,
		by.Language, by.WorkerVersion, by.Queue)
	if err != nil {
		return nil, fmt.Errorf("record payload schemas: %w", err)
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("record payload schemas: %w", err)
	}
	return changed, nil
}

const schemaHashesSQL = `SELECT DISTINCT ON (type) type, hash FROM job_type_schemas ORDER BY type, version DESC`

// SchemaHashes returns the hash of each type's schema in force.
func (s *Store) SchemaHashes(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, schemaHashesSQL)
	if err != nil {
		return nil, fmt.Errorf("read schema hashes: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var t, h string
		if err := rows.Scan(&t, &h); err != nil {
			return nil, fmt.Errorf("read schema hashes: %w", err)
		}
		out[t] = h
	}
	return out, rows.Err()
}

const schemaTextsSQL = `
SELECT DISTINCT ON (type) type, schema::text FROM job_type_schemas WHERE type = ANY($1::text[]) ORDER BY type, version DESC`

// SchemaTexts returns the schemas in force of types.
func (s *Store) SchemaTexts(ctx context.Context, types []string) (map[string]json.RawMessage, error) {
	rows, err := s.pool.Query(ctx, schemaTextsSQL, types)
	if err != nil {
		return nil, fmt.Errorf("read schemas: %w", err)
	}
	defer rows.Close()
	out := map[string]json.RawMessage{}
	for rows.Next() {
		var t, text string
		if err := rows.Scan(&t, &text); err != nil {
			return nil, fmt.Errorf("read schemas: %w", err)
		}
		out[t] = json.RawMessage(text)
	}
	return out, rows.Err()
}

const schemaHistorySQL = `
SELECT version, schema::text, hash, source, worker_id, worker_name, language, worker_version, queue, created_at
FROM job_type_schemas WHERE type = $1 ORDER BY version DESC`

// SchemaHistory returns every kept version of jobType's schema, the one
// in force first.
func (s *Store) SchemaHistory(ctx context.Context, jobType string) ([]domain.SchemaVersion, error) {
	rows, err := s.pool.Query(ctx, schemaHistorySQL, jobType)
	if err != nil {
		return nil, fmt.Errorf("read schema history: %w", err)
	}
	defer rows.Close()
	var out []domain.SchemaVersion
	for rows.Next() {
		var v domain.SchemaVersion
		var text string
		if err := rows.Scan(&v.Version, &text, &v.Hash, &v.By.Source, &v.By.WorkerID, &v.By.WorkerName, &v.By.Language,
			&v.By.WorkerVersion, &v.By.Queue, &v.CreatedAt); err != nil {
			return nil, fmt.Errorf("read schema history: %w", err)
		}
		v.Type, v.Schema = jobType, json.RawMessage(text)
		out = append(out, v)
	}
	return out, rows.Err()
}

// pruneSchemasSQL forgets the schemas of types no worker has served for
// $1 milliseconds and that no push queue's settings gave (the API no
// longer accepts them), whole types at a time.
const pruneSchemasSQL = `
DELETE FROM job_type_schemas s
WHERE NOT EXISTS (SELECT 1 FROM job_types_served t WHERE t.type = s.type)
  AND NOT EXISTS (SELECT 1 FROM job_type_schemas n WHERE n.type = s.type
                  AND (n.source = 'queue' OR n.created_at > now() - $1 * interval '1 millisecond'))`

// pruneSchemas deletes the schemas of forgotten types (Prune's).
func (s *Store) pruneSchemas(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, pruneSchemasSQL, domain.ServedTypesWindow.Milliseconds()); err != nil {
		return fmt.Errorf("prune payload schemas: %w", err)
	}
	return nil
}
