-- migrate:up

-- When a user's password was last set (a reset with flint users
-- reset-password, or a change on the Account page). Failed sign-ins are
-- throttled in each server's memory, out of reach of the CLI; a server
-- that refuses an account for its failures reads this, and forgets the
-- failures from before it, so a reset lifts a locked-out admin's lockout
-- in every process at once. NULL: not changed since the user was added.
ALTER TABLE users ADD COLUMN password_changed_at timestamptz;

-- migrate:down
ALTER TABLE users DROP COLUMN password_changed_at;
