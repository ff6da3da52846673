-- migrate:up

-- Push queues: Flint POSTs each job of the queue to push_url instead of
-- waiting for a worker. Requests are signed (Standard Webhooks) with
-- push_secret and, while a rotation is under way, push_prev_secret too.
-- An endpoint that answers 410 Gone pauses the push (push_paused_at, with
-- the reason) until an operator sets it again; one that answers 429 or
-- 503 holds the queue back until push_hold_until. Setting or removing the
-- URL bumps flow_control_version like every other queue setting (workers
-- must stop or start taking the queue's jobs); holds do not.
ALTER TABLE queues
    ADD COLUMN push_url             text,
    ADD COLUMN push_timeout_seconds integer CHECK (push_timeout_seconds BETWEEN 1 AND 1800),
    ADD COLUMN push_secret          text,
    ADD COLUMN push_prev_secret     text,
    ADD COLUMN push_paused_at       timestamptz,
    ADD COLUMN push_paused_reason   text,
    ADD COLUMN push_hold_until      timestamptz,
    ADD CONSTRAINT queues_push_whole CHECK ((push_url IS NULL) = (push_secret IS NULL)
        AND (push_url IS NULL) = (push_timeout_seconds IS NULL));

-- push_deliveries: the recent pushes of each queue, for its page (kept a
-- day; the pusher prunes as it writes).
CREATE TABLE push_deliveries (
    queue       text NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    job_id      uuid NOT NULL,
    attempt     integer NOT NULL,
    status_code integer NOT NULL,
    outcome     text NOT NULL,
    error       text,
    duration_ms bigint NOT NULL
);
CREATE INDEX push_deliveries_queue_idx ON push_deliveries (queue, at DESC);

-- migrate:down
DROP TABLE push_deliveries;
ALTER TABLE queues DROP CONSTRAINT queues_push_whole,
    DROP COLUMN push_url, DROP COLUMN push_timeout_seconds, DROP COLUMN push_secret, DROP COLUMN push_prev_secret,
    DROP COLUMN push_paused_at, DROP COLUMN push_paused_reason, DROP COLUMN push_hold_until;
