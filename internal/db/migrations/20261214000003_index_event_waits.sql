-- migrate:up transaction:false

-- Jobs waiting for an event, by its name (POST /api/v1/events). Built
-- concurrently: the jobs table keeps taking writes meanwhile.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_waiting_event_idx ON jobs (wait_name) WHERE status = 'waiting' AND wait_kind = 'event';

-- migrate:down

DROP INDEX IF EXISTS jobs_waiting_event_idx;
