-- migrate:up

-- alert_outbox: DLQ alert emails waiting to go out. Writing the alert here,
-- in the same transaction that claims the cooldown window, means an SMTP
-- outage delays the email (it is retried) but never loses it and never
-- holds up anything else.
CREATE TABLE alert_outbox (
    id              bigserial PRIMARY KEY,
    created_at      timestamptz NOT NULL DEFAULT now(),
    recipients      text[] NOT NULL,
    subject         text NOT NULL,
    text_body       text NOT NULL,
    html_body       text NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    failed_at       timestamptz,
    last_error      text
);
CREATE INDEX alert_outbox_due_idx ON alert_outbox (next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL;

-- migrate:down
DROP TABLE alert_outbox;
