-- migrate:up

-- The edges of workflows (job_dependencies) and their step keys
-- (workflow_steps) are written only by Flint, in the transaction that
-- creates the jobs they name or after locking the existing jobs they name
-- (see resolveDependencies), so their foreign keys checked what was true
-- by construction, at a price: one lookup and row lock in jobs per key per
-- row, two thirds of the cost of recording a fan-out's edges. They go;
-- what they also did, deleting a job's edges and step key with the job,
-- a statement trigger does for the whole statement at once.
--
-- Dropping a foreign key takes a short exclusive lock on jobs; lock_timeout
-- makes the migration fail and retry rather than queue every job writer
-- behind a long transaction.
SET LOCAL lock_timeout = '10s';

CREATE FUNCTION flint_forget_deleted_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	DELETE FROM job_dependencies WHERE job_id = ANY (ARRAY(SELECT id FROM gone));
	DELETE FROM job_dependencies WHERE depends_on_id = ANY (ARRAY(SELECT id FROM gone));
	DELETE FROM workflow_steps WHERE job_id = ANY (ARRAY(SELECT id FROM gone));
	RETURN NULL;
END
$$;

CREATE TRIGGER jobs_forget_deleted AFTER DELETE ON jobs
	REFERENCING OLD TABLE AS gone
	FOR EACH STATEMENT EXECUTE FUNCTION flint_forget_deleted_jobs();

ALTER TABLE job_dependencies
	DROP CONSTRAINT job_dependencies_job_id_fkey,
	DROP CONSTRAINT job_dependencies_depends_on_id_fkey;
ALTER TABLE workflow_steps DROP CONSTRAINT workflow_steps_job_id_fkey;

-- migrate:down

SET LOCAL lock_timeout = '10s';
DELETE FROM job_dependencies d WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = d.job_id)
	OR NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = d.depends_on_id);
DELETE FROM workflow_steps s WHERE NOT EXISTS (SELECT 1 FROM jobs j WHERE j.id = s.job_id);
ALTER TABLE job_dependencies
	ADD CONSTRAINT job_dependencies_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE,
	ADD CONSTRAINT job_dependencies_depends_on_id_fkey FOREIGN KEY (depends_on_id) REFERENCES jobs (id) ON DELETE CASCADE;
ALTER TABLE workflow_steps ADD CONSTRAINT workflow_steps_job_id_fkey FOREIGN KEY (job_id) REFERENCES jobs (id) ON DELETE CASCADE;
DROP TRIGGER jobs_forget_deleted ON jobs;
DROP FUNCTION flint_forget_deleted_jobs();
