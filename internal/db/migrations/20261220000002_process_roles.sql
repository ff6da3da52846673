-- migrate:up

-- Every Flint process now keeps an entry in the registry, not only those
-- that run workers: roles says what it runs (api, scheduler, workers), so
-- that the Workers page shows each process's version and `flint migrate`
-- finds an older API or scheduler process as it finds an older worker.
-- An entry without roles is a remote worker, or a worker process of a
-- version from before roles were recorded.
ALTER TABLE workers ADD COLUMN roles text[] NOT NULL DEFAULT '{}';

-- migrate:down

DELETE FROM workers WHERE kind = 'process' AND concurrency = 0;
ALTER TABLE workers DROP COLUMN roles;
