-- migrate:up

-- Remote workers (any language, pulling work over HTTP) share the workers
-- table with in-process pools: kind tells them apart, name, language and
-- version are what the worker said of itself, key_id is the API key that
-- registered it (NULL: the bootstrap key), and requested_state is what an
-- operator asked of it (quiet: stop claiming; terminate: stop), answered
-- on its next heartbeat.
ALTER TABLE workers
    ADD COLUMN kind text NOT NULL DEFAULT 'process' CHECK (kind IN ('process', 'remote')),
    ADD COLUMN name text NOT NULL DEFAULT '',
    ADD COLUMN language text NOT NULL DEFAULT '',
    ADD COLUMN key_id uuid,
    ADD COLUMN requested_state text NOT NULL DEFAULT 'running' CHECK (requested_state IN ('running', 'quiet', 'terminate'));

-- job_types_served: every job type a worker has said it serves, with when
-- it last said so. The API accepts a type served within the last 24 hours,
-- so an API process without a type's handler accepts jobs for a worker
-- that has one (a program of its own, a remote worker), and a worker that
-- restarts or deploys does not make enqueues fail meanwhile.
CREATE TABLE job_types_served (
    type         text PRIMARY KEY,
    last_seen_at timestamptz NOT NULL,
    worker_id    text NOT NULL
);

-- API keys: the work scope (pull workers), and an optional list of the
-- queues a key may work (NULL: every queue).
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys
    ADD CONSTRAINT api_keys_scopes_check
        CHECK (scopes <@ ARRAY['enqueue', 'read', 'operate', 'admin', 'work'] AND cardinality(scopes) > 0),
    ADD COLUMN queues text[];

-- migrate:down
ALTER TABLE api_keys DROP COLUMN queues;
DELETE FROM api_keys WHERE 'work' = ANY(scopes);
ALTER TABLE api_keys DROP CONSTRAINT api_keys_scopes_check;
ALTER TABLE api_keys
    ADD CONSTRAINT api_keys_scopes_check CHECK (scopes <@ ARRAY['enqueue', 'read', 'operate', 'admin'] AND cardinality(scopes) > 0);
DROP TABLE job_types_served;
ALTER TABLE workers DROP COLUMN kind, DROP COLUMN name, DROP COLUMN language, DROP COLUMN key_id, DROP COLUMN requested_state;
