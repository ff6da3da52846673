-- migrate:up

-- A job spawned with a dependency on its spawner ("$self" in its
-- depends_on) waits for a job that completed in the very transaction that
-- created it: the edge orders nothing, it only says that the child reads
-- the spawner's result. A fan-out wrote one job_dependencies row (and two
-- index entries) per child for it, the largest part of the graft's cost
-- after the jobs themselves. The child's step row, written anyway, now
-- carries it: reads_spawner says that spawned_by is one of its parents.
-- Edges written before this migration (or by an older process during a
-- rolling upgrade) stay in job_dependencies, and every reader takes both.
-- An older process that claims a child recorded this way passes it its
-- other parents without the spawner's result; finish the upgrade before
-- relying on "$self" results from pull or push workers of older versions.
ALTER TABLE workflow_steps ADD COLUMN reads_spawner boolean NOT NULL DEFAULT false;

-- migrate:down

INSERT INTO job_dependencies (job_id, depends_on_id)
SELECT s.job_id, s.spawned_by FROM workflow_steps s
WHERE s.reads_spawner
  AND NOT EXISTS (SELECT 1 FROM job_dependencies d WHERE d.job_id = s.job_id AND d.depends_on_id = s.spawned_by);
ALTER TABLE workflow_steps DROP COLUMN reads_spawner;
