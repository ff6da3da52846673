-- migrate:up

-- The listing indexes keep each group (a status, a type, a queue) in
-- ascending id order. Ids are UUIDv7, so a new entry is the largest of
-- its group: ascending, it lands at the group's right edge, and when the
-- group is the index's last (the only type or queue of many services) on
-- the index's rightmost page, which PostgreSQL inserts into without
-- descending the tree; descending, as they were, it landed at the left
-- edge, a full descent every time and every concurrent insert on the same
-- first page. The indexes end the same size either way.
-- Listings read newest first by scanning backwards, which costs the same.
-- Measured with 1,000-row inserts of one status, type and queue from two
-- connections into a table of several million jobs: 62-69 statements a
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
