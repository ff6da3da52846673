-- migrate:up

-- Progress a handler reports while it runs (0-100 and a short message).
-- Written with the heartbeat, so it costs no statement of its own; a claim
-- clears it for the new attempt.
ALTER TABLE jobs
    ADD COLUMN progress smallint CHECK (progress BETWEEN 0 AND 100),
    ADD COLUMN progress_message text;

-- job_logs: what a job's handler logged, and Flint's own lifecycle lines
-- for it (claimed, retried, timed out, interrupted, cancelled), per attempt.
-- Written in batches off the hot path, capped per attempt, scrubbed like
-- the log file; it goes when the job goes.
CREATE TABLE job_logs (
    job_id  uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq     bigint GENERATED ALWAYS AS IDENTITY,
    attempt integer NOT NULL,
    at      timestamptz NOT NULL,
    level   text NOT NULL CHECK (level IN ('debug', 'info', 'warn', 'error')),
    message text NOT NULL,
    attrs   jsonb NOT NULL DEFAULT '{}',
    PRIMARY KEY (job_id, seq)
);

-- migrate:down
DROP TABLE job_logs;
ALTER TABLE jobs DROP COLUMN progress, DROP COLUMN progress_message;
