-- migrate:up

-- job_counts: how many jobs are finished (completed, dead_letter,
-- cancelled) or in the bin, per queue, type and state. Live jobs are few
-- and have partial indexes to count them; finished ones pile up (millions)
-- and counting them would scan them all, so these counts are kept as the
-- rows change, by statement-level triggers that see every statement's
-- changed rows at once (transition tables): one grouped upsert per
-- statement, whichever code path wrote it, and nothing at all for the
-- statements that only move live jobs (claims, heartbeats), which are the
-- hot path. Sixteen shards per group (picked by backend) let concurrent
-- finishers write side by side; readers sum them.
CREATE TABLE job_counts (
    queue   text NOT NULL,
    type    text NOT NULL,
    status  text NOT NULL,
    in_bin  boolean NOT NULL,
    shard   smallint NOT NULL,
    n       bigint NOT NULL,
    PRIMARY KEY (queue, type, status, in_bin, shard)
);

CREATE FUNCTION jobs_count_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
        SELECT queue, type, status, deleted_at IS NOT NULL, pg_backend_pid() % 16, count(*)
        FROM new_rows
        WHERE status IN ('completed', 'dead_letter', 'cancelled') OR deleted_at IS NOT NULL
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (queue, type, status, in_bin, shard) DO UPDATE SET n = job_counts.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
        SELECT queue, type, status, deleted_at IS NOT NULL, pg_backend_pid() % 16, -count(*)
        FROM old_rows
        WHERE status IN ('completed', 'dead_letter', 'cancelled') OR deleted_at IS NOT NULL
        GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
        ON CONFLICT (queue, type, status, in_bin, shard) DO UPDATE SET n = job_counts.n + excluded.n;
    ELSE
        INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
        SELECT queue, type, status, in_bin, pg_backend_pid() % 16, sum(d)
        FROM (
            SELECT queue, type, status, deleted_at IS NOT NULL AS in_bin, -1 AS d FROM old_rows
            WHERE status IN ('completed', 'dead_letter', 'cancelled') OR deleted_at IS NOT NULL
            UNION ALL
            SELECT queue, type, status, deleted_at IS NOT NULL, 1 FROM new_rows
            WHERE status IN ('completed', 'dead_letter', 'cancelled') OR deleted_at IS NOT NULL
        ) changed
        GROUP BY 1, 2, 3, 4 HAVING sum(d) <> 0 ORDER BY 1, 2, 3, 4
        ON CONFLICT (queue, type, status, in_bin, shard) DO UPDATE SET n = job_counts.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_count_inserts AFTER INSERT ON jobs REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_changes();
CREATE TRIGGER jobs_count_updates AFTER UPDATE ON jobs REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_changes();
CREATE TRIGGER jobs_count_deletes AFTER DELETE ON jobs REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_count_changes();

-- The jobs already there (the migration holds the table's lock meanwhile).
LOCK TABLE jobs IN SHARE MODE;
INSERT INTO job_counts (queue, type, status, in_bin, shard, n)
SELECT queue, type, status, deleted_at IS NOT NULL, 0, count(*) FROM jobs
WHERE status IN ('completed', 'dead_letter', 'cancelled') OR deleted_at IS NOT NULL
GROUP BY 1, 2, 3, 4;

-- migrate:down
DROP TRIGGER jobs_count_deletes ON jobs;
DROP TRIGGER jobs_count_updates ON jobs;
DROP TRIGGER jobs_count_inserts ON jobs;
DROP FUNCTION jobs_count_changes();
DROP TABLE job_counts;
