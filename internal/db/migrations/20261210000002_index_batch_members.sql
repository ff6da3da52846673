-- migrate:up transaction:false

-- A batch's members, for its page and for the results its callbacks
-- read. Built concurrently: the jobs table keeps taking writes meanwhile
-- (the build reads every row once, and only members enter the index).
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_batch_idx ON jobs (batch_id, status) WHERE batch_id IS NOT NULL;

-- migrate:down

DROP INDEX IF EXISTS jobs_batch_idx;
