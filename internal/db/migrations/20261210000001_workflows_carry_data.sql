-- migrate:up

-- Workflows that carry data: parents' results reach their children, jobs
-- add jobs to their own workflow, batches call back when they settle.
-- Every column added here is nullable or has a constant default, so the
-- ALTERs are catalog changes only (no table rewrite) and processes of the
-- previous release keep running beside them: they never set the new
-- columns, and what they write means what it meant.

-- has_parents: the job has dependencies (or is a batch callback), so its
-- claim carries its parents' results. A flag, so that the claim of a job
-- without any looks nothing up.
-- batch_id: the batch the job is a member of.
ALTER TABLE jobs
    ADD COLUMN has_parents boolean NOT NULL DEFAULT false,
    ADD COLUMN batch_id uuid;
-- job_history copies jobs' columns (the archive moves rows by jobColumns).
ALTER TABLE job_history
    ADD COLUMN has_parents boolean NOT NULL DEFAULT false,
    ADD COLUMN batch_id uuid;

-- workflow_steps.workflow_id: the workflow (one submission, and whatever
-- its jobs added while they ran) a step key belongs to; a key names one
-- job within it. Rows from before this column have none, and their
-- workflows cannot be grown by key (a job of one adds to a workflow of
-- its own, named by its id).
-- spawned_by: the job whose completion added this one (jobs.Spawn), so
-- that pages can show what a job added and draw it beside its spawner.
ALTER TABLE workflow_steps ADD COLUMN workflow_id uuid, ADD COLUMN spawned_by uuid;
CREATE INDEX workflow_steps_spawned_idx ON workflow_steps (spawned_by) WHERE spawned_by IS NOT NULL;
CREATE UNIQUE INDEX workflow_steps_key_idx ON workflow_steps (workflow_id, step_key) WHERE workflow_id IS NOT NULL;

-- batches: a set of jobs with callbacks. The counters say where the
-- members are: pending (not finished and not in the bin), completed,
-- dead_letter, cancelled and binned; total is their sum. A trigger on jobs
-- (below) keeps them as members move, whichever code path moves them, and
-- settles the batch in the transaction that finishes its last member.
CREATE TABLE batches (
    id          uuid PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    closed_at   timestamptz,
    settled_at  timestamptz,
    died_at     timestamptz,
    total       integer NOT NULL DEFAULT 0 CHECK (total >= 0),
    pending     integer NOT NULL DEFAULT 0 CHECK (pending >= 0),
    completed   integer NOT NULL DEFAULT 0 CHECK (completed >= 0),
    dead_letter integer NOT NULL DEFAULT 0 CHECK (dead_letter >= 0),
    cancelled   integer NOT NULL DEFAULT 0 CHECK (cancelled >= 0),
    binned      integer NOT NULL DEFAULT 0 CHECK (binned >= 0),
    CONSTRAINT batches_settled_closed CHECK (settled_at IS NULL OR closed_at IS NOT NULL)
);

-- batch_callbacks: the jobs a batch enqueues when it settles (on_success,
-- on_complete) or when its first member dies (on_death), validated and
-- given their ids when the batch was created; job_id exists in jobs once
-- fired_at is set.
CREATE TABLE batch_callbacks (
    batch_id        uuid NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('on_success', 'on_complete', 'on_death')),
    job_id          uuid NOT NULL UNIQUE,
    type            text NOT NULL,
    queue           text NOT NULL,
    payload         jsonb NOT NULL,
    priority        smallint NOT NULL,
    max_retries     integer NOT NULL,
    timeout_seconds integer,
    concurrency_key text,
    fired_at        timestamptz,
    PRIMARY KEY (batch_id, kind)
);

-- flint_fire_callback enqueues one callback of a batch, once, and wakes
-- the workers of its queue (a rare statement: the notify lock that job
-- transactions avoid is no cost here).
CREATE FUNCTION flint_fire_callback(b_id uuid, which text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE c batch_callbacks;
BEGIN
    UPDATE batch_callbacks SET fired_at = now()
    WHERE batch_id = b_id AND kind = which AND fired_at IS NULL
    RETURNING * INTO c;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO jobs (id, type, queue, payload, priority, effective_priority, status, max_retries,
                      timeout_seconds, concurrency_key, has_parents)
    VALUES (c.job_id, c.type, c.queue, c.payload, c.priority, c.priority, 'queued', c.max_retries,
            c.timeout_seconds, c.concurrency_key, true);
    PERFORM pg_notify('flint_jobs', c.queue);
    PERFORM pg_notify('flint_events', 'batch [' || json_build_object(
        'job_id', c.job_id, 'status', 'queued', 'type', c.type, 'queue', c.queue, 'attempt', 0,
        'at', now(), 'batch_id', b_id)::text || ']');
END
$$;

-- flint_settle_batch settles a closed batch whose members have all
-- finished: the first time, it marks the batch settled, fires on_complete
-- and announces the settlement; and whenever every member has completed
-- (at once, or after a dead member was replayed and completed), it fires
-- on_success. Each callback fires once (flint_fire_callback). The caller
-- holds the batch's row lock (the counter update or the close took it),
-- so two finishes cannot both settle it.
CREATE FUNCTION flint_settle_batch(b_id uuid) RETURNS void LANGUAGE plpgsql AS $$
DECLARE b batches;
BEGIN
    SELECT * INTO b FROM batches WHERE id = b_id;
    IF NOT FOUND OR b.pending <> 0 OR b.closed_at IS NULL OR b.total = 0 THEN
        RETURN;
    END IF;
    IF b.completed = b.total THEN
        PERFORM flint_fire_callback(b_id, 'on_success');
    END IF;
    IF b.settled_at IS NULL THEN
        UPDATE batches SET settled_at = now() WHERE id = b_id;
        PERFORM flint_fire_callback(b_id, 'on_complete');
        PERFORM pg_notify('flint_events', 'batch [' || json_build_object(
            'job_id', b_id, 'kind', 'batch', 'batch_id', b_id, 'type', '', 'queue', '', 'attempt', 0, 'at', now(),
            'status', CASE WHEN b.completed = b.total THEN 'succeeded'
                           WHEN b.dead_letter > 0 THEN 'dead' ELSE 'completed' END)::text || ']');
    END IF;
END
$$;

-- jobs_batch_changes keeps the batch counters as members change state or
-- go to the bin and back, one update per statement and per batch, in
-- batch id order (two statements moving members of the same batches lock
-- them in the same order). It is a statement-level trigger with
-- transition tables, as job_counts is kept (PostgreSQL fills the
-- transition tables once for both). Statements that move no member
-- (almost all of them) stop at the first check; moves that leave every
-- counter as it was (a claim: queued to running, both pending) update
-- nothing, so claims never wait on a batch's row. Members are counted in
-- when they are created (the batch API does it in the same transaction),
-- and a row deleted or moved to the history is not uncounted: archiving
-- keeps its count, and only a binned member can be purged.
CREATE FUNCTION jobs_batch_changes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE d record; b batches;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM new_rows WHERE batch_id IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    FOR d IN
        WITH changed AS (
            SELECT batch_id,
                   CASE WHEN deleted_at IS NOT NULL THEN 'binned'
                        WHEN status IN ('completed', 'dead_letter', 'cancelled') THEN status
                        ELSE 'pending' END AS bucket,
                   -1 AS n
            FROM old_rows WHERE batch_id IS NOT NULL
            UNION ALL
            SELECT batch_id,
                   CASE WHEN deleted_at IS NOT NULL THEN 'binned'
                        WHEN status IN ('completed', 'dead_letter', 'cancelled') THEN status
                        ELSE 'pending' END,
                   1
            FROM new_rows WHERE batch_id IS NOT NULL
        ),
        delta AS (
            SELECT batch_id,
                   coalesce(sum(n) FILTER (WHERE bucket = 'pending'), 0) AS pending,
                   coalesce(sum(n) FILTER (WHERE bucket = 'completed'), 0) AS completed,
                   coalesce(sum(n) FILTER (WHERE bucket = 'dead_letter'), 0) AS dead_letter,
                   coalesce(sum(n) FILTER (WHERE bucket = 'cancelled'), 0) AS cancelled,
                   coalesce(sum(n) FILTER (WHERE bucket = 'binned'), 0) AS binned
            FROM changed GROUP BY batch_id
        )
        SELECT * FROM delta
        WHERE (pending, completed, dead_letter, cancelled, binned) <> (0, 0, 0, 0, 0)
        ORDER BY batch_id
    LOOP
        UPDATE batches SET
            pending = pending + d.pending,
            completed = completed + d.completed,
            dead_letter = dead_letter + d.dead_letter,
            cancelled = cancelled + d.cancelled,
            binned = binned + d.binned
        WHERE id = d.batch_id
        RETURNING * INTO b;
        IF NOT FOUND THEN
            CONTINUE;
        END IF;
        IF d.dead_letter > 0 AND b.died_at IS NULL THEN
            UPDATE batches SET died_at = now() WHERE id = b.id;
            PERFORM flint_fire_callback(b.id, 'on_death');
        END IF;
        IF b.pending = 0 THEN
            PERFORM flint_settle_batch(b.id);
        END IF;
    END LOOP;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_batch_updates AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_batch_changes();

-- migrate:down

DROP TRIGGER jobs_batch_updates ON jobs;
DROP FUNCTION jobs_batch_changes();
DROP FUNCTION flint_settle_batch(uuid);
DROP FUNCTION flint_fire_callback(uuid, text);
DROP TABLE batch_callbacks;
DROP TABLE batches;
DROP INDEX workflow_steps_spawned_idx;
DROP INDEX workflow_steps_key_idx;
ALTER TABLE workflow_steps DROP COLUMN spawned_by, DROP COLUMN workflow_id;
ALTER TABLE job_history DROP COLUMN batch_id, DROP COLUMN has_parents;
ALTER TABLE jobs DROP COLUMN batch_id, DROP COLUMN has_parents;
