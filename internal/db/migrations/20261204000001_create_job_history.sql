-- migrate:up

-- job_history: finished jobs, moved out of jobs a while after they finish
-- (the history_after_minutes setting), partitioned by final state and then
-- by the day (UTC) they finished, so that retention removes a day of a
-- state by dropping its partition: no row deletes, no dead rows, no
-- vacuum, the same cost at ten million rows as at ten thousand. jobs keeps
-- what is alive, what is fresh, what sits in the bin and what belongs to a
-- workflow; it stays small, and so do its thirteen indexes.
--
-- A history row is a jobs row (the same columns, in the same order: a
-- migration that adds a column to jobs adds it here too, and a test holds
-- the two to it) plus the job's runs and log lines, carried along as JSON
-- arrays so that they leave with it. Nothing updates a history row: an
-- operation that changes a finished job (replay, edit and replay, delete
-- to the bin, a new job depending on it) first moves it back into jobs.
--
-- The day partitions are created as they are needed and dropped by
-- retention; their parents below are never dropped.
CREATE TABLE job_history (LIKE jobs INCLUDING DEFAULTS) PARTITION BY LIST (status);
ALTER TABLE job_history
    ADD COLUMN execution_rows jsonb NOT NULL DEFAULT '[]',
    ADD COLUMN log_rows jsonb NOT NULL DEFAULT '[]',
    ADD CONSTRAINT job_history_finished CHECK (finished_at IS NOT NULL AND deleted_at IS NULL);

CREATE TABLE job_history_completed PARTITION OF job_history
    FOR VALUES IN ('completed') PARTITION BY RANGE (finished_at);
CREATE TABLE job_history_cancelled PARTITION OF job_history
    FOR VALUES IN ('cancelled') PARTITION BY RANGE (finished_at);
CREATE TABLE job_history_dead_letter PARTITION OF job_history
    FOR VALUES IN ('dead_letter') PARTITION BY RANGE (finished_at);

-- By id (the job page, the API), newest first per state (the state lists),
-- per type and per queue (the filtered lists) and by a series' occurrence;
-- dead-letter jobs also by when they failed (the overview's recent
-- failures and the DLQ alert). A lookup by id also says the job finished
-- no earlier than its id was made (ids are UUIDv7), which leaves out the
-- days before it.
CREATE INDEX job_history_id_idx ON job_history (id DESC);
CREATE INDEX job_history_type_idx ON job_history (type, id DESC);
CREATE INDEX job_history_queue_idx ON job_history (queue, id DESC);
CREATE INDEX job_history_schedule_idx ON job_history (schedule_id, scheduled_for) WHERE schedule_id IS NOT NULL;
CREATE INDEX job_history_dead_finished_idx ON job_history_dead_letter (finished_at DESC);

-- The idempotency keys of jobs in the history, in one index: a keyed
-- enqueue looks its keys up here after its insert (a key stays taken
-- while its job exists), one probe per key rather than one per day
-- partition. Its rows leave with their day.
CREATE TABLE job_history_keys (
    idempotency_key text PRIMARY KEY,
    job_id          uuid NOT NULL,
    status          text NOT NULL,
    day             date NOT NULL
);
CREATE INDEX job_history_keys_day_idx ON job_history_keys (status, day);

-- How many jobs each day partition holds, per queue and type, written by
-- the statement that moves them: a partition dropped by retention takes
-- its share out of job_counts without being counted row by row.
CREATE TABLE job_history_counts (
    status text NOT NULL,
    day    date NOT NULL,
    queue  text NOT NULL,
    type   text NOT NULL,
    n      bigint NOT NULL,
    PRIMARY KEY (status, day, queue, type)
);

-- migrate:down
DROP TABLE job_history_keys;
DROP TABLE job_history_counts;
DROP TABLE job_history;
