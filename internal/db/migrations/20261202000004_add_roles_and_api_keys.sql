-- migrate:up

-- Roles: viewer reads, operator also acts on jobs and queues, admin also
-- changes settings, people and keys. A disabled user cannot sign in and
-- has no sessions (disabling deletes them in the same transaction).
ALTER TABLE users DROP CONSTRAINT users_role_check;
ALTER TABLE users
    ADD CONSTRAINT users_role_check CHECK (role IN ('viewer', 'operator', 'admin')),
    ADD COLUMN disabled_at timestamptz;

-- api_keys: one per calling service. Only the SHA-256 of the secret is
-- kept (the secret is 32 random bytes, so a fast hash is enough: nothing
-- to guess). A rotation moves the current hash to prev_hash, which stays
-- valid until prev_expires_at. Revoked keys keep their row, so their name
-- stays unique and the audit trail that names them stays readable.
CREATE TABLE api_keys (
    id              uuid PRIMARY KEY,
    name            text NOT NULL,
    scopes          text[] NOT NULL CHECK (scopes <@ ARRAY['enqueue', 'read', 'operate', 'admin'] AND cardinality(scopes) > 0),
    hash            text NOT NULL,
    prefix          text NOT NULL,
    prev_hash       text,
    prev_expires_at timestamptz,
    created_by      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    rotated_at      timestamptz,
    last_used_at    timestamptz,
    revoked_at      timestamptz
);
CREATE UNIQUE INDEX api_keys_name_idx ON api_keys (lower(name));
CREATE UNIQUE INDEX api_keys_hash_idx ON api_keys (hash);
CREATE INDEX api_keys_prev_hash_idx ON api_keys (prev_hash) WHERE prev_hash IS NOT NULL;

-- The audit trail also records changes made with the flint users command.
ALTER TABLE audit_log DROP CONSTRAINT audit_log_source_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_source_check CHECK (source IN ('api', 'dashboard', 'cli'));

-- migrate:down
UPDATE audit_log SET source = 'api' WHERE source = 'cli';
ALTER TABLE audit_log DROP CONSTRAINT audit_log_source_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_source_check CHECK (source IN ('api', 'dashboard'));
DROP TABLE api_keys;
UPDATE users SET role = 'viewer' WHERE role = 'operator';
ALTER TABLE users DROP CONSTRAINT users_role_check, DROP COLUMN disabled_at;
ALTER TABLE users ADD CONSTRAINT users_role_check CHECK (role IN ('admin', 'viewer'));
