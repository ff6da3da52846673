-- migrate:up

-- job_schedules: recurring series. Each occurrence is a job row pointing
-- back here; the series itself never runs.
CREATE TABLE job_schedules (
    id               uuid PRIMARY KEY,
    type             text NOT NULL,
    queue            text NOT NULL DEFAULT 'default',
    payload          jsonb NOT NULL DEFAULT '{}',
    priority         smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 3),
    max_retries      integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
    timeout_seconds  integer CHECK (timeout_seconds > 0),
    interval_seconds bigint CHECK (interval_seconds > 0),
    cron             text,
    timezone         text NOT NULL DEFAULT 'UTC',
    paused           boolean NOT NULL DEFAULT false,
    -- last_run_at is the target time of the latest occurrence released to
    -- run; next_run_at the target of the pending one.
    last_run_at      timestamptz,
    next_run_at      timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT job_schedules_one_rule CHECK ((interval_seconds IS NULL) <> (cron IS NULL))
);

ALTER TABLE jobs
    ADD COLUMN schedule_id   uuid REFERENCES job_schedules (id) ON DELETE SET NULL,
    ADD COLUMN scheduled_for timestamptz,
    ADD COLUMN cancelled_by  uuid;

-- Exactly one pending next occurrence per series, enforced here rather than
-- trusted to whichever scheduler process gets there first. Pending means
-- scheduled and never started: an occurrence waiting out a retry backoff
-- is also scheduled, but it is past work, not the next occurrence.
CREATE UNIQUE INDEX jobs_schedule_pending_idx ON jobs (schedule_id)
    WHERE schedule_id IS NOT NULL AND status = 'scheduled' AND executions = 0 AND deleted_at IS NULL;
-- And never two occurrences for the same firing time.
CREATE UNIQUE INDEX jobs_schedule_fire_idx ON jobs (schedule_id, scheduled_for)
    WHERE schedule_id IS NOT NULL;
-- Jobs a failed or cancelled dependency cancelled, for re-arming on replay.
CREATE INDEX jobs_cancelled_by_idx ON jobs (cancelled_by) WHERE cancelled_by IS NOT NULL;

-- settings_changes: who changed which runtime setting, when, from what.
CREATE TABLE settings_changes (
    id         bigserial PRIMARY KEY,
    key        text NOT NULL,
    old_value  jsonb,
    new_value  jsonb NOT NULL,
    changed_by text NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT now()
);

-- loop_leases: maintenance passes that must run once per interval across
-- every scheduler process (priority aging) claim their turn here.
CREATE TABLE loop_leases (
    name        text PRIMARY KEY,
    last_run_at timestamptz NOT NULL DEFAULT '-infinity',
    holder      text
);

-- job_throughput is bumped by every statement that finishes runs. One row
-- per minute and outcome made those statements queue behind each other's
-- row lock; sixteen shards per minute (picked by backend) let concurrent
-- finishers write side by side. Readers sum the shards.
ALTER TABLE job_throughput ADD COLUMN shard smallint NOT NULL DEFAULT 0;
ALTER TABLE job_throughput DROP CONSTRAINT job_throughput_pkey;
ALTER TABLE job_throughput ADD PRIMARY KEY (bucket, outcome, shard);

-- migrate:down
DELETE FROM job_throughput WHERE shard <> 0;
ALTER TABLE job_throughput DROP CONSTRAINT job_throughput_pkey;
ALTER TABLE job_throughput DROP COLUMN shard;
ALTER TABLE job_throughput ADD PRIMARY KEY (bucket, outcome);
DROP TABLE loop_leases;
DROP TABLE settings_changes;
DROP INDEX jobs_cancelled_by_idx;
DROP INDEX jobs_schedule_fire_idx;
DROP INDEX jobs_schedule_pending_idx;
ALTER TABLE jobs DROP COLUMN cancelled_by, DROP COLUMN scheduled_for, DROP COLUMN schedule_id;
DROP TABLE job_schedules;
