-- migrate:up

-- process_logs: the structured log entries of every Flint process (serve,
-- api, worker, scheduler), so the Logs page shows them all whichever
-- process serves it. Each process writes its own, already scrubbed, in
-- batches from a bounded buffer, never on a job's path; stdout keeps the
-- complete record. The scheduler's retention pass deletes entries older
-- than the log_retention_days setting.
--
--   at          when the process logged the entry (its own clock)
--   level       slog's level number: -4 debug, 0 info, 4 warn, 8 error
--   process_id  FLINT_WORKER_ID of the process (as in leases and the
--               workers table); host and role (serve, api, worker,
--               scheduler) complete its identity
--   component   the entry's "component" attribute ('' when it has none)
--   job_id      the entry's "job_id" attribute, when it is a job id
--   attrs       every other attribute
--   xid         the writing transaction, and stored_at the database time
--               of the write: the live tail reads in (xid, id) order up to
--               the oldest transaction still open, so an entry committed
--               late is shown late rather than never (see db/process_logs.go)
CREATE TABLE process_logs (
    id         bigint GENERATED ALWAYS AS IDENTITY,
    at         timestamptz NOT NULL,
    level      smallint NOT NULL,
    process_id text NOT NULL,
    host       text NOT NULL,
    role       text NOT NULL,
    component  text NOT NULL DEFAULT '',
    message    text NOT NULL,
    job_id     uuid,
    attrs      jsonb NOT NULL DEFAULT '{}',
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    stored_at  timestamptz NOT NULL DEFAULT statement_timestamp(),
    -- Newest first pages (a backward scan), their (at, id) cursor and the
    -- retention's oldest-first deletes all walk this one index.
    PRIMARY KEY (at, id)
);
-- One process's entries, newest first; also lists the processes seen
-- (a skip scan over process_id).
CREATE INDEX process_logs_process_idx ON process_logs (process_id, at, id);
-- The live tail: entries after a (xid, id) mark.
CREATE INDEX process_logs_tail_idx ON process_logs (xid, id);
-- Warnings and errors, newest first: the few an operator looks for among
-- many info entries.
CREATE INDEX process_logs_warn_idx ON process_logs (at, id) WHERE level >= 4;
-- Entries about one job.
CREATE INDEX process_logs_job_idx ON process_logs (job_id, at, id) WHERE job_id IS NOT NULL;

-- migrate:down
DROP TABLE process_logs;
