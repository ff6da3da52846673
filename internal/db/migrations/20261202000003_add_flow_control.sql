-- migrate:up

-- Flow control. A job may name a concurrency key (a tenant, a customer):
-- in a queue with per_key_concurrency, claims rotate across keys and no
-- key has more than that many jobs running. The partial index holds only
-- queued jobs that carry a key, so jobs without one cost nothing more to
-- enqueue; it lets a claim step from key to key (a skip scan) and take
-- each key's next jobs in claim order.
ALTER TABLE jobs ADD COLUMN concurrency_key text;
ALTER TABLE job_schedules ADD COLUMN concurrency_key text;
CREATE INDEX jobs_claim_key_idx ON jobs (queue, concurrency_key, effective_priority, run_at, created_at, id)
    WHERE status = 'queued' AND deleted_at IS NULL AND concurrency_key IS NOT NULL;

-- queues: one row per queue an operator has configured. A queue without a
-- row (or with every limit null and not paused) is unconstrained and is
-- claimed exactly as before. tokens/tokens_at are the rate limit's bucket,
-- refilled by elapsed time and charged by the claim for each job it starts;
-- key_cursor is where the rotation across concurrency keys stands.
CREATE TABLE queues (
    name                text PRIMARY KEY,
    paused              boolean NOT NULL DEFAULT false,
    concurrency         integer CHECK (concurrency > 0),
    rate_limit          integer CHECK (rate_limit > 0),
    rate_period_seconds integer CHECK (rate_period_seconds > 0),
    per_key_concurrency integer CHECK (per_key_concurrency > 0),
    tokens              double precision NOT NULL DEFAULT 0,
    tokens_at           timestamptz NOT NULL DEFAULT now(),
    key_cursor          text,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    updated_by          text NOT NULL DEFAULT 'system',
    CHECK ((rate_limit IS NULL) = (rate_period_seconds IS NULL))
);

-- flow_control_version: bumped by every change to queues. Every claim
-- compares it with the version its process last loaded, so a process that
-- has not heard of a change yet claims nothing rather than too much.
CREATE TABLE flow_control_version (
    one     boolean PRIMARY KEY DEFAULT true CHECK (one),
    version bigint NOT NULL DEFAULT 0
);
INSERT INTO flow_control_version DEFAULT VALUES;

-- migrate:down
DROP TABLE flow_control_version;
DROP TABLE queues;
DROP INDEX jobs_claim_key_idx;
ALTER TABLE job_schedules DROP COLUMN concurrency_key;
ALTER TABLE jobs DROP COLUMN concurrency_key;
