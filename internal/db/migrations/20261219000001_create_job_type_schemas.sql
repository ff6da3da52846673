-- migrate:up

-- job_type_schemas: the JSON Schema each job type's payloads must fit,
-- every version of it. A Go process stores its typed handlers' schemas
-- (source 'process'), a pull worker declares them when it registers
-- ('remote'), and a push queue's settings may give them ('queue'). The
-- highest version of a type is in force: every API process checks
-- payloads against it at enqueue. A registration with a schema unlike the
-- one in force adds a version, so a change by a newer worker is recorded
-- with who made it. The text is kept as given (json, not jsonb), so its
-- properties stay in their order for the dashboard's forms.
CREATE TABLE job_type_schemas (
    type           text NOT NULL,
    version        integer NOT NULL CHECK (version > 0),
    schema         json NOT NULL,
    hash           text NOT NULL,
    source         text NOT NULL CHECK (source IN ('process', 'remote', 'queue')),
    worker_id      text NOT NULL DEFAULT '',
    worker_name    text NOT NULL DEFAULT '',
    language       text NOT NULL DEFAULT '',
    worker_version text NOT NULL DEFAULT '',
    queue          text NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (type, version)
);

-- migrate:down
DROP TABLE job_type_schemas;
