-- migrate:up

-- Durable execution: steps recorded once, sleeps and waits that hold no
-- worker, and signals. Like every migration, this one expands only: the
-- new columns are nullable or have constant defaults (catalog changes, no
-- rewrite), and the widened CHECK constraints are added NOT VALID, which
-- checks every row written from now on without scanning the table under
-- the ALTER's lock (every existing row satisfies them: they only allow
-- more). Processes of the previous release never write the new values.

-- durable: the job has recorded a step, waited, or been sent a signal, so
-- its claim carries its steps and signals (a flag, as has_parents is, so
-- that the claim of any other job looks nothing up). Durable jobs stay in
-- jobs (they are not moved to the history), with their steps.
-- wait_kind, wait_name: what a waiting job waits for ('sleep' with its
-- step's name, 'signal' or 'event' with the name); its run_at is when the
-- wait ends (the wake time, or the timeout).
ALTER TABLE jobs
    ADD COLUMN durable boolean NOT NULL DEFAULT false,
    ADD COLUMN wait_kind text,
    ADD COLUMN wait_name text;
ALTER TABLE job_history
    ADD COLUMN durable boolean NOT NULL DEFAULT false,
    ADD COLUMN wait_kind text,
    ADD COLUMN wait_name text;

ALTER TABLE jobs DROP CONSTRAINT jobs_status_check,
    ADD CONSTRAINT jobs_status_check CHECK (status IN
        ('blocked', 'scheduled', 'queued', 'running', 'waiting', 'completed', 'dead_letter', 'cancelled')) NOT VALID,
    ADD CONSTRAINT jobs_waiting_whole CHECK (
        (status = 'waiting') = (wait_kind IS NOT NULL AND wait_name IS NOT NULL)
        AND wait_kind IN ('sleep', 'signal', 'event')) NOT VALID;

-- A suspended run ended by sleeping or waiting, without charging its
-- attempt.
ALTER TABLE job_executions DROP CONSTRAINT job_executions_outcome_check,
    ADD CONSTRAINT job_executions_outcome_check CHECK (outcome IN
        ('running', 'succeeded', 'failed', 'interrupted', 'cancelled', 'suspended')) NOT VALID;

-- job_steps: a job's recorded steps, one row per name, numbered in the
-- order the handler reached them. A row is written only by the holder of
-- the job's current lease (the insert joins the jobs row on its token),
-- and never changed: a later attempt reads it instead of running the step.
CREATE TABLE job_steps (
    job_id      uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 200),
    seq         integer NOT NULL CHECK (seq > 0),
    attempt     integer NOT NULL,
    result      jsonb,
    started_at  timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);
ALTER TABLE job_steps SET (autovacuum_vacuum_scale_factor = 0.02);

-- job_signals: what a job has been sent (a signal, an event it waited
-- for) or a wait that timed out, by name; a sender's id makes a repeated
-- send a no-op. A job reads the first row of each name.
CREATE TABLE job_signals (
    job_id      uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (octet_length(name) BETWEEN 1 AND 200),
    dedupe_id   text NOT NULL CHECK (octet_length(dedupe_id) BETWEEN 1 AND 200),
    kind        text NOT NULL CHECK (kind IN ('signal', 'event', 'timeout')),
    body        jsonb,
    received_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, name, dedupe_id)
);

-- migrate:down

DROP TABLE job_signals;
DROP TABLE job_steps;
ALTER TABLE job_executions DROP CONSTRAINT job_executions_outcome_check,
    ADD CONSTRAINT job_executions_outcome_check CHECK (outcome IN
        ('running', 'succeeded', 'failed', 'interrupted', 'cancelled')) NOT VALID;
ALTER TABLE jobs DROP CONSTRAINT jobs_waiting_whole, DROP CONSTRAINT jobs_status_check,
    ADD CONSTRAINT jobs_status_check CHECK (status IN
        ('blocked', 'scheduled', 'queued', 'running', 'completed', 'dead_letter', 'cancelled')) NOT VALID;
ALTER TABLE job_history DROP COLUMN wait_name, DROP COLUMN wait_kind, DROP COLUMN durable;
ALTER TABLE jobs DROP COLUMN wait_name, DROP COLUMN wait_kind, DROP COLUMN durable;
