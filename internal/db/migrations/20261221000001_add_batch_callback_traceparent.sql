-- migrate:up

-- traceparent: the trace context of the enqueue that created the batch
-- (its members' enqueue span), given to the callback job when it fires,
-- so that the callback's attempts continue the trace that started the
-- batch, as its members' do. NULL when tracing was off or the batch was
-- created without trace context. Nullable without a default: a catalog
-- change, and a process of the previous release neither reads nor writes
-- it (its callbacks fire without one).
ALTER TABLE batch_callbacks ADD COLUMN traceparent text;

CREATE OR REPLACE FUNCTION flint_fire_callback(b_id uuid, which text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE c batch_callbacks;
BEGIN
    UPDATE batch_callbacks SET fired_at = now()
    WHERE batch_id = b_id AND kind = which AND fired_at IS NULL
    RETURNING * INTO c;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    INSERT INTO jobs (id, type, queue, payload, priority, effective_priority, status, max_retries,
                      timeout_seconds, concurrency_key, has_parents, traceparent)
    VALUES (c.job_id, c.type, c.queue, c.payload, c.priority, c.priority, 'queued', c.max_retries,
            c.timeout_seconds, c.concurrency_key, true, c.traceparent);
    PERFORM pg_notify('flint_jobs', c.queue);
    PERFORM pg_notify('flint_events', 'batch [' || json_build_object(
        'job_id', c.job_id, 'status', 'queued', 'type', c.type, 'queue', c.queue, 'attempt', 0,
        'at', now(), 'batch_id', b_id)::text || ']');
END
$$;

-- migrate:down

CREATE OR REPLACE FUNCTION flint_fire_callback(b_id uuid, which text) RETURNS void LANGUAGE plpgsql AS $$
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
ALTER TABLE batch_callbacks DROP COLUMN traceparent;
