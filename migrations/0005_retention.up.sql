-- Durable dead letters, replay, retention and erasure (issue 14).

-- Every attempt's error, oldest first, at most 50 entries:
-- [{"at": "...", "attempt": 3, "job_id": 12, "error": "..."}]. A jsonb array
-- on the row rather than a child table: every failure already rewrites the
-- row (attempts, last_error), so the history costs no extra write, lock or
-- join; it goes wherever the row goes (pruned, erased) with nothing to
-- cascade; and it mirrors River's own river_job.errors, which River's cleaner
-- deletes with the job. A constant default makes this ALTER metadata-only.
ALTER TABLE webhook_inbox ADD COLUMN attempt_errors jsonb NOT NULL DEFAULT '[]';

-- When the row's body, headers and payload were erased (payload_retention,
-- or `inboxctl events purge`); the row's keys stay, so that a late
-- redelivery is still a duplicate. An erased row is never worked or
-- replayed.
ALTER TABLE webhook_inbox ADD COLUMN erased_at timestamptz;
ALTER TABLE webhook_inbox ALTER COLUMN body DROP NOT NULL;
ALTER TABLE webhook_inbox ALTER COLUMN headers DROP NOT NULL;

-- Bulk replays: one row per `inboxctl replay` run, its filter, where it got
-- to and what it did. Owned by pkg/replay.
CREATE TABLE hookinbox_replay (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- The selection, as pkg/inbox.Selection in JSON.
    selection    jsonb       NOT NULL,
    state        text        NOT NULL DEFAULT 'running',
    -- The largest webhook_inbox.id replayed so far: the run resumes after it.
    cursor_id    bigint      NOT NULL DEFAULT 0,
    -- Rows the selection matched when the run started, and rows replayed.
    total        bigint      NOT NULL DEFAULT 0,
    replayed     bigint      NOT NULL DEFAULT 0,
    -- Rows per second, and rows per batch transaction.
    rate         integer     NOT NULL,
    batch        integer     NOT NULL,
    -- The River job currently working the run; a job that is not this one
    -- stops at once.
    river_job_id bigint,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    finished_at  timestamptz,
    CONSTRAINT hookinbox_replay_state_check CHECK (state IN ('running', 'cancelled', 'done'))
);
