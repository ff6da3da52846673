-- migrate:up

-- audit_log: every operator action (retry, cancel, delete, restore, purge,
-- DLQ replay, settings change, recurring series changes), from the API or
-- the dashboard: who, what, when and from where.
CREATE TABLE audit_log (
    id      bigserial PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    source  text NOT NULL CHECK (source IN ('api', 'dashboard')),
    ip      text NOT NULL DEFAULT '',
    action  text NOT NULL,
    job_id  uuid,
    details jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_job_idx ON audit_log (job_id, id DESC) WHERE job_id IS NOT NULL;
CREATE INDEX audit_log_at_idx ON audit_log (at);

-- migrate:down
DROP TABLE audit_log;
