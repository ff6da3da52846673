-- migrate:up

-- A fifth alert kind: jobs that have slept or waited for a signal or an
-- event longer than a threshold (threshold: seconds; queue: one queue or
-- each on its own).
ALTER TABLE alert_rules DROP CONSTRAINT alert_rules_kind_check,
    ADD CONSTRAINT alert_rules_kind_check CHECK (kind IN ('failure_rate', 'queue_latency', 'cron_overdue', 'no_worker', 'job_waiting'));

-- migrate:down

DELETE FROM alert_rules WHERE kind = 'job_waiting';
ALTER TABLE alert_rules DROP CONSTRAINT alert_rules_kind_check,
    ADD CONSTRAINT alert_rules_kind_check CHECK (kind IN ('failure_rate', 'queue_latency', 'cron_overdue', 'no_worker'));
