-- migrate:up

-- job_throughput counts finished runs per minute by type and queue too, so
-- an alert rule reads a type's failure rate, and the Queues page a queue's
-- throughput, from a few rows instead of scanning job_executions.
ALTER TABLE job_throughput ADD COLUMN type text NOT NULL DEFAULT '';
ALTER TABLE job_throughput ADD COLUMN queue text NOT NULL DEFAULT '';
ALTER TABLE job_throughput DROP CONSTRAINT job_throughput_pkey;
ALTER TABLE job_throughput ADD PRIMARY KEY (bucket, outcome, type, queue, shard);

-- alert_rules: conditions evaluated once per interval for the whole
-- cluster. kind decides which of the optional columns mean something:
--   failure_rate:  type (empty: each type), window_seconds, threshold (0..1), min_runs
--   queue_latency: queue (empty: each queue), threshold (seconds)
--   cron_overdue:  series (empty: each series), grace_seconds
--   no_worker:     queue (empty: each queue), grace_seconds
CREATE TABLE alert_rules (
    id               bigserial PRIMARY KEY,
    name             text NOT NULL,
    kind             text NOT NULL CHECK (kind IN ('failure_rate', 'queue_latency', 'cron_overdue', 'no_worker')),
    type             text NOT NULL DEFAULT '',
    queue            text NOT NULL DEFAULT '',
    series           uuid,
    threshold        double precision NOT NULL DEFAULT 0,
    window_seconds   integer NOT NULL DEFAULT 300 CHECK (window_seconds > 0),
    min_runs         integer NOT NULL DEFAULT 10 CHECK (min_runs > 0),
    grace_seconds    integer NOT NULL DEFAULT 300 CHECK (grace_seconds >= 0),
    cooldown_seconds integer NOT NULL DEFAULT 3600 CHECK (cooldown_seconds > 0),
    emails           text[] NOT NULL DEFAULT '{}',
    webhook_url      text NOT NULL DEFAULT '',
    webhook_secret   text NOT NULL DEFAULT '',
    enabled          boolean NOT NULL DEFAULT true,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- alerts: what the rules found. One open row (resolved_at IS NULL) per rule
-- and subject (a type, a queue or a series) while its condition holds.
CREATE TABLE alerts (
    id               bigserial PRIMARY KEY,
    rule_id          bigint NOT NULL REFERENCES alert_rules (id) ON DELETE CASCADE,
    subject          text NOT NULL,
    value            double precision NOT NULL,
    message          text NOT NULL,
    fired_at         timestamptz NOT NULL DEFAULT now(),
    last_notified_at timestamptz NOT NULL DEFAULT now(),
    notifications    integer NOT NULL DEFAULT 1,
    resolved_at      timestamptz
);
CREATE UNIQUE INDEX alerts_open_idx ON alerts (rule_id, subject) WHERE resolved_at IS NULL;
CREATE INDEX alerts_fired_idx ON alerts (id DESC);

-- alert_outbox carries webhooks as well as emails: channel says which.
ALTER TABLE alert_outbox
    ADD COLUMN channel        text NOT NULL DEFAULT 'email' CHECK (channel IN ('email', 'webhook')),
    ADD COLUMN webhook_url    text NOT NULL DEFAULT '',
    ADD COLUMN webhook_secret text NOT NULL DEFAULT '',
    ADD COLUMN alert_id       bigint REFERENCES alerts (id) ON DELETE SET NULL;

-- migrate:down
ALTER TABLE alert_outbox DROP COLUMN alert_id, DROP COLUMN webhook_secret, DROP COLUMN webhook_url, DROP COLUMN channel;
DROP TABLE alerts;
DROP TABLE alert_rules;
DELETE FROM job_throughput WHERE type <> '' OR queue <> '';
ALTER TABLE job_throughput DROP CONSTRAINT job_throughput_pkey;
ALTER TABLE job_throughput DROP COLUMN queue, DROP COLUMN type;
ALTER TABLE job_throughput ADD PRIMARY KEY (bucket, outcome, shard);
