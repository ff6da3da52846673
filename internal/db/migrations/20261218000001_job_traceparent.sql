-- migrate:up

-- traceparent: the W3C trace context of the enqueue (the span that
-- enqueued the job, under the request's traceparent or the caller's
-- context), kept so that every attempt, wherever it runs, continues that
-- trace. NULL when tracing was off or the enqueue carried no trace. A
-- nullable column without a default: a catalog change, no rewrite, and
-- processes of the previous release neither read nor write it.
ALTER TABLE jobs ADD COLUMN traceparent text;
ALTER TABLE job_history ADD COLUMN traceparent text;

-- migrate:down
ALTER TABLE job_history DROP COLUMN traceparent;
ALTER TABLE jobs DROP COLUMN traceparent;
