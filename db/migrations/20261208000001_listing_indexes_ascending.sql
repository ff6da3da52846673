-- migrate:up

-- The listing indexes keep each group (a status, a type, a queue) in
-- ascending id order. Ids are UUIDv7, so a new entry is the largest of
-- its group: ascending, it lands at the group's right edge, where
-- PostgreSQL's split of a full page leaves the left half full. Descending,
-- as they were, it landed at the group's left edge, and every full page
-- split in two half-empty ones: about twice the pages and WAL per entry.
-- Listings read newest first by scanning backwards, which costs the same.
-- Measured with 1,000-row inserts from two connections: 62-69 inserts a
-- second with the descending indexes, 101-110 with ascending ones.
--
-- The indexes are rebuilt in this transaction, which holds writes to jobs
-- while it runs: on a 2-core server, about 0.8 s per index per million
-- rows that are not running (history lives in job_history, not here).
DROP INDEX jobs_status_idx;
DROP INDEX jobs_type_idx;
DROP INDEX jobs_queue_idx;
CREATE INDEX jobs_status_idx ON jobs (status, id) WHERE deleted_at IS NULL AND status <> 'running';
CREATE INDEX jobs_type_idx ON jobs (type, id) WHERE deleted_at IS NULL AND status <> 'running';
CREATE INDEX jobs_queue_idx ON jobs (queue, id) WHERE deleted_at IS NULL AND status <> 'running';

-- migrate:down

DROP INDEX jobs_status_idx;
DROP INDEX jobs_type_idx;
DROP INDEX jobs_queue_idx;
CREATE INDEX jobs_status_idx ON jobs (status, id DESC) WHERE deleted_at IS NULL AND status <> 'running';
CREATE INDEX jobs_type_idx ON jobs (type, id DESC) WHERE deleted_at IS NULL AND status <> 'running';
CREATE INDEX jobs_queue_idx ON jobs (queue, id DESC) WHERE deleted_at IS NULL AND status <> 'running';
