-- migrate:up

-- The jobs list's text search looks for a part of the last error
-- (ILIKE '%term%'). Without an index that reads every row of the live
-- table and of the history: seconds at ten million jobs for a term that
-- matches little. Trigram indexes (pg_trgm, shipped with PostgreSQL and a
-- trusted extension: the database's owner may create it) find the rows
-- that contain a term of three or more characters. Only rows with an
-- error are indexed: most finished jobs have none.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX jobs_error_trgm_idx ON jobs USING gin (last_error gin_trgm_ops) WHERE last_error IS NOT NULL;
CREATE INDEX job_history_error_trgm_idx ON job_history USING gin (last_error gin_trgm_ops) WHERE last_error IS NOT NULL;

-- migrate:down
DROP INDEX job_history_error_trgm_idx;
DROP INDEX jobs_error_trgm_idx;
