-- migrate:up transaction:false

-- Waiting jobs by the time their wait ends (the promoter wakes them).
-- Built concurrently: the jobs table keeps taking writes meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_waiting_idx ON jobs (run_at) WHERE status = 'waiting' AND deleted_at IS NULL;

-- migrate:down

DROP INDEX IF EXISTS jobs_waiting_idx;
