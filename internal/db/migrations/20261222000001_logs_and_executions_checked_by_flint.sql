-- migrate:up

-- A job's executions and log lines (job_executions, job_logs) are
-- written by statements that hold the job's row: the finish, the reaper
-- and a suspension insert them from the rows their UPDATE returned, and
-- InsertJobLogs locks each job it writes for (FOR KEY SHARE) before its
-- lines go in. Their foreign keys therefore checked what was true by
-- construction, at one lookup and row lock in jobs per execution and per
-- log line (about 2 µs and 54 bytes of WAL a drained job), and their
-- ON DELETE CASCADE deleted a moved job's executions and lines one job at
-- a time. They go; the statement trigger that already forgets a deleted
-- job's edges and step key deletes its executions and lines too, for the
-- whole statement at once.
--
-- A process of the previous release keeps working: the trigger deletes
-- for it as for this one. Its InsertJobLogs does not lock the job, so a
-- line it writes for a job being deleted at that moment may outlive the
-- job, unseen (nothing reads lines but by a live or archived job).
SET LOCAL lock_timeout = '10s';

CREATE OR REPLACE FUNCTION flint_forget_deleted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE gone_ids uuid[] := ARRAY(SELECT id FROM gone);
BEGIN
	DELETE FROM job_dependencies WHERE job_id = ANY (gone_ids);
	DELETE FROM job_dependencies WHERE depends_on_id = ANY (gone_ids);
	DELETE FROM workflow_steps WHERE job_id = ANY (gone_ids);
	DELETE FROM job_executions WHERE job_id = ANY (gone_ids);
	DELETE FROM job_logs WHERE job_id = ANY (gone_ids);
	RETURN NULL;
END
$$;

ALTER TABLE job_executions DROP CONSTRAINT job_executions_job_id_fkey;
ALTER TABLE job_logs DROP CONSTRAINT job_logs_job_id_fkey;

-- migrate:down

SET LOCAL lock_timeout = '10s';
DELETE FROM job_executions e WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = e.job_id);
DELETE FROM job_logs l WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = l.job_id);
ALTER TABLE job_executions ADD CONSTRAINT job_executions_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
ALTER TABLE job_logs ADD CONSTRAINT job_logs_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
CREATE OR REPLACE FUNCTION flint_forget_deleted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM job_dependencies WHERE job_id = ANY (ARRAY(SELECT id FROM gone));
	DELETE FROM job_dependencies WHERE depends_on_id = ANY (ARRAY(SELECT id FROM gone));
	DELETE FROM workflow_steps WHERE job_id = ANY (ARRAY(SELECT id FROM gone));
	RETURN NULL;
END
$$;
