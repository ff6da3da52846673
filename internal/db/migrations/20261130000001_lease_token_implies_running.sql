-- migrate:up

-- A lease is whole or absent: token and expiry are set and cleared together.
-- With jobs_running_holds_lease this makes "lease_token = the caller's token"
-- prove on its own that the job is running, so the statements fenced by the
-- token (finish, heartbeat) need no other condition on the jobs row. Any
-- such condition lets the planner, whose statistics say that almost nothing
-- runs while a backlog drains, scan jobs for it and compare every row with
-- every input row: a second of CPU for a batch of 1,000 outcomes.
ALTER TABLE jobs ADD CONSTRAINT jobs_lease_whole
    CHECK ((lease_token IS NULL) = (lease_expires_at IS NULL)) NOT VALID;
ALTER TABLE jobs VALIDATE CONSTRAINT jobs_lease_whole;

-- migrate:down

ALTER TABLE jobs DROP CONSTRAINT jobs_lease_whole;
