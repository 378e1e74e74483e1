-- The inbox: one row per event a provider delivered. The unique keys are the
-- deduplication gate: the receiver claims events with
-- INSERT ... ON CONFLICT DO NOTHING and no conflict target, so every unique
-- key declared here (and any added later) is enforced by that one statement.
CREATE TABLE webhook_inbox (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source        text        NOT NULL,
    provider      text        NOT NULL,
    event_id      text        NOT NULL,
    event_type    text        NOT NULL DEFAULT '',
    -- The parsed event; NULL when an authentic delivery could not be parsed.
    payload       jsonb,
    -- The raw bytes the signature covered, and the headers needed to verify
    -- them again (signature, timestamp, ids, topic).
    body          bytea       NOT NULL,
    headers       jsonb       NOT NULL DEFAULT '{}',
    status        text        NOT NULL DEFAULT 'pending',
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text,
    -- A remark that is not an error, e.g. "no route matched".
    note          text,
    received_at   timestamptz NOT NULL DEFAULT now(),
    processed_at  timestamptz,
    -- The River job currently responsible for the row (river_job.id). No
    -- foreign key: River prunes finished jobs on its own schedule.
    river_job_id  bigint,
    CONSTRAINT webhook_inbox_status_check CHECK (status IN ('pending', 'done', 'failed')),
    CONSTRAINT webhook_inbox_source_event_id_key UNIQUE (source, event_id)
);

-- The reaper's scan: pending rows by age.
CREATE INDEX webhook_inbox_pending_idx ON webhook_inbox (received_at) WHERE status = 'pending';
-- Retention pruning and time-ranged listing.
CREATE INDEX webhook_inbox_received_at_idx ON webhook_inbox (received_at);
