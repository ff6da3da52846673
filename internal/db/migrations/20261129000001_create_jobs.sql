-- migrate:up

-- jobs: one row per job. Status values match jobs.State in Go character for
-- character; the CHECK constraints are the last line of defence for the state
-- machine and for the lease invariant (a running job always holds a lease).
CREATE TABLE jobs (
    id                 uuid PRIMARY KEY,
    type               text NOT NULL,
    queue              text NOT NULL DEFAULT 'default',
    payload            jsonb NOT NULL DEFAULT '{}',
    priority           smallint NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 3),
    effective_priority double precision NOT NULL CHECK (effective_priority >= 1 AND effective_priority <= 3),
    status             text NOT NULL CHECK (status IN
                         ('blocked', 'scheduled', 'queued', 'running', 'completed', 'dead_letter', 'cancelled')),
    attempt            integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_retries        integer NOT NULL DEFAULT 3 CHECK (max_retries >= 0),
    interruptions      integer NOT NULL DEFAULT 0 CHECK (interruptions >= 0),
    executions         integer NOT NULL DEFAULT 0 CHECK (executions >= 0),
    run_at             timestamptz NOT NULL DEFAULT now(),
    timeout_seconds    integer CHECK (timeout_seconds > 0),
    idempotency_key    text,
    cancel_requested   boolean NOT NULL DEFAULT false,
    last_error         text,
    result             jsonb,
    worker_id          text,
    lease_token        uuid,
    lease_expires_at   timestamptz,
    created_at         timestamptz NOT NULL DEFAULT now(),
    updated_at         timestamptz NOT NULL DEFAULT now(),
    started_at         timestamptz,
    finished_at        timestamptz,
    deleted_at         timestamptz,
    CONSTRAINT jobs_running_holds_lease CHECK (
        (status = 'running') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL))
);

-- The claim path: the next due jobs in claim order, for all queues and for
-- one queue. Partial, so the index holds only what is waiting to run.
CREATE INDEX jobs_claim_idx ON jobs (effective_priority, run_at, created_at, id)
    WHERE status = 'queued' AND deleted_at IS NULL;
CREATE INDEX jobs_claim_queue_idx ON jobs (queue, effective_priority, run_at, created_at, id)
    WHERE status = 'queued' AND deleted_at IS NULL;
-- Promoter: scheduled jobs by due time.
CREATE INDEX jobs_scheduled_idx ON jobs (run_at) WHERE status = 'scheduled' AND deleted_at IS NULL;
-- Reaper: running jobs by lease expiry.
CREATE INDEX jobs_lease_idx ON jobs (lease_expires_at) WHERE status = 'running';
CREATE UNIQUE INDEX jobs_idempotency_key_idx ON jobs (idempotency_key) WHERE idempotency_key IS NOT NULL;
-- Listing with keyset pagination. Ids are UUIDv7, so id order is creation
-- order and the primary key serves the unfiltered list.
CREATE INDEX jobs_status_idx ON jobs (status, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX jobs_type_idx ON jobs (type, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX jobs_queue_idx ON jobs (queue, id DESC) WHERE deleted_at IS NULL;
CREATE INDEX jobs_bin_idx ON jobs (deleted_at DESC, id DESC) WHERE deleted_at IS NOT NULL;

-- A queue table churns: vacuum it long before the default 20% of dead rows.
ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_analyze_scale_factor = 0.02);

-- job_executions: one row per finished run of a job (succeeded, failed,
-- interrupted or cancelled). The run in progress lives on the jobs row until
-- it ends, so each run costs one insert here.
CREATE TABLE job_executions (
    job_id      uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq         integer NOT NULL CHECK (seq > 0),
    attempt     integer NOT NULL,
    worker_id   text NOT NULL,
    started_at  timestamptz NOT NULL,
    finished_at timestamptz NOT NULL,
    outcome     text NOT NULL CHECK (outcome IN ('running', 'succeeded', 'failed', 'interrupted', 'cancelled')),
    error       text,
    duration_ms bigint NOT NULL,
    PRIMARY KEY (job_id, seq)
);
-- Defence in depth: whatever happens, a job succeeds at most once.
CREATE UNIQUE INDEX job_executions_one_success_idx ON job_executions (job_id) WHERE outcome = 'succeeded';
ALTER TABLE job_executions SET (autovacuum_vacuum_scale_factor = 0.02);

-- job_dependencies: edges of DAG workflows. job_id waits for depends_on_id.
CREATE TABLE job_dependencies (
    job_id        uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    depends_on_id uuid NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    PRIMARY KEY (job_id, depends_on_id),
    CHECK (job_id <> depends_on_id)
);
CREATE INDEX job_dependencies_depends_on_idx ON job_dependencies (depends_on_id);

-- job_throughput: finished runs per minute and outcome, maintained by the
-- same statement that records them, so throughput never needs a scan.
CREATE TABLE job_throughput (
    bucket  timestamptz NOT NULL,
    outcome text NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (bucket, outcome)
);

-- settings: runtime settings, one JSON value per key.
CREATE TABLE settings (
    key        text PRIMARY KEY,
    value      jsonb NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now(),
    updated_by text NOT NULL DEFAULT 'system'
);

-- migrate:down
DROP TABLE settings;
DROP TABLE job_throughput;
DROP TABLE job_dependencies;
DROP TABLE job_executions;
DROP TABLE jobs;
