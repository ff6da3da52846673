-- migrate:up

-- workers.types: the job types each worker process has a handler for,
-- written with its heartbeat, so that "why isn't this job running?" can
-- say from the database that no live worker can run a job's type (a
-- process started without the handler, or an older build). Empty means the
-- process did not say (one from before this column): it may run any type.
ALTER TABLE workers ADD COLUMN types text[] NOT NULL DEFAULT '{}';

-- migrate:down
ALTER TABLE workers DROP COLUMN types;
