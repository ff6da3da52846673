-- migrate:up

-- workers: the worker registry in PostgreSQL. Each worker process upserts
-- its row every few seconds; a row whose heartbeat is older than the TTL is
-- a process that is gone. It is for display only: lease expiry, never this
-- table, decides whether a job's worker is alive.
CREATE TABLE workers (
    id           text PRIMARY KEY,
    host         text NOT NULL,
    pid          integer NOT NULL,
    queues       text[] NOT NULL DEFAULT '{}',
    concurrency  integer NOT NULL,
    version      text NOT NULL,
    started_at   timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);
CREATE INDEX workers_heartbeat_idx ON workers (heartbeat_at);

-- migrate:down
DROP TABLE workers;
