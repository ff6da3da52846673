-- migrate:up

-- Recent failures for the dashboard, without scanning every execution: only
-- runs that did not succeed are indexed, so the hot path (successes) pays
-- nothing for it.
CREATE INDEX job_executions_failures_idx ON job_executions (finished_at DESC) WHERE outcome <> 'succeeded';

-- migrate:down
DROP INDEX job_executions_failures_idx;
