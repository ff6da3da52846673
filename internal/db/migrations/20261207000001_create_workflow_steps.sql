-- migrate:up

-- workflow_steps: the key each job of a workflow submission was given
-- (POST /api/v1/workflows), so that the dashboard can draw the workflow
-- with the names its author chose. Only workflow jobs have a row, and
-- jobs with dependencies never move to the history, so the row lives and
-- dies with its job.
CREATE TABLE workflow_steps (
    job_id   uuid PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    step_key text NOT NULL CHECK (octet_length(step_key) BETWEEN 1 AND 100)
);

-- migrate:down

DROP TABLE workflow_steps;
