-- migrate:up

-- The history by when its jobs finished and started, either way round: the
-- Jobs list ordered by finish or start time, and the dead-letter queue
-- ordered by failure time, read these rather than sort every day of the
-- history. Each day partition gets its own; the partitions are written
-- once (the archiver's move) and never updated.
--
-- Not built concurrently: PostgreSQL cannot on a partitioned table. The
-- build locks the history against writes only: reads go on, and the
-- archiver's next move, or an action that brings an archived job back
-- (a replay, a delete), waits for it; jobs, where work happens, is not
-- touched. Older processes are unaffected.
CREATE INDEX job_history_finished_idx ON job_history (finished_at, id);
CREATE INDEX job_history_started_idx ON job_history (started_at, id);

-- migrate:down

DROP INDEX job_history_finished_idx;
DROP INDEX job_history_started_idx;
