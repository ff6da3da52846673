-- migrate:up

-- login_addresses: where each person has signed in from (an IPv4
-- address, or an IPv6 /64), and when last. The sign-in throttle slows an
-- account down after failures, but not for addresses the account has
-- signed in from before: an attacker guessing from elsewhere cannot lock
-- the owner out. Rows older than 180 days are deleted at the user's next
-- sign-in.
CREATE TABLE login_addresses (
    user_id           uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    address           text NOT NULL,
    last_signed_in_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, address)
);

-- migrate:down
DROP TABLE login_addresses;
