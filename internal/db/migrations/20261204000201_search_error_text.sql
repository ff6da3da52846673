-- migrate:up

-- The jobs list's text search looks for a part of the last error (ILIKE
-- '%term%'). In the history it searches a day partition at a time, newest
-- first (db/queries.go, searchHistory), each through this trigram index
-- (pg_trgm, shipped with PostgreSQL and a trusted extension: the
-- database's owner may create it), so a term that matches little does not
-- read every row of ten million. Only rows with an error are indexed: most
-- finished jobs have none. fastupdate is off: with it, new entries wait in
-- a pending list that every search reads through until VACUUM merges it
-- (a search that matched nothing took 100 ms instead of 6 over ten
-- million jobs). The live table holds only what is alive or fresh and is
-- searched as it is.
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE INDEX job_history_error_trgm_idx ON job_history USING gin (last_error gin_trgm_ops) WITH (fastupdate = off)
    WHERE last_error IS NOT NULL;

-- migrate:down
DROP INDEX job_history_error_trgm_idx;
