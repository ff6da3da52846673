-- migrate:up

-- jobs is a queue: every job's row is rewritten when it is claimed and
-- when it finishes, and moved out to the history soon after, so the table
-- turns over its whole content many times a day while staying small. It
-- is vacuumed at 1% dead rows and analyzed at 2% already (create_jobs).
-- What remained of PostgreSQL's defaults held autovacuum back on exactly
-- this table: a VACUUM throttled to the default cost limit (200 pages of
-- work, then a 2 ms sleep) falls behind dead rows that arrive at
-- thousands a second, and inserts alone (a backlog being enqueued) never
-- triggered a VACUUM until 20% of the table was new, so the visibility
-- map lagged. Let a VACUUM of jobs do ten times the work between sleeps
-- of 1 ms, count 1,000 dead rows as the floor of the 1% (a nearly empty
-- queue would otherwise be vacuumed every few dozen rows), and vacuum
-- after inserts of 5% of the table. Where autovacuum is off or behind
-- anyway, Flint's own Vacuumer (scheduler/vacuumer.go) takes over.
ALTER TABLE jobs SET (
	autovacuum_vacuum_threshold = 1000,
	autovacuum_vacuum_insert_scale_factor = 0.05,
	autovacuum_vacuum_cost_limit = 2000,
	autovacuum_vacuum_cost_delay = 1
);

-- migrate:down
ALTER TABLE jobs RESET (
	autovacuum_vacuum_threshold,
	autovacuum_vacuum_insert_scale_factor,
	autovacuum_vacuum_cost_limit,
	autovacuum_vacuum_cost_delay
);
