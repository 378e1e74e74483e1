-- Paused sources (issue 14, point 6). A row here holds the source's events:
-- the receiver keeps claiming them (2xx), and every worker replica leaves
-- them pending, detached from their job, until `inboxctl sources resume`
-- deletes the row and enqueues them again in the same transaction. Owned by
-- pkg/inbox (pause.go).
CREATE TABLE hookinbox_source_pause (
    source     text        PRIMARY KEY,
    paused_at  timestamptz NOT NULL DEFAULT now(),
    -- Who or what paused it ("inboxctl", "admin-api"), for the operator.
    paused_by  text        NOT NULL DEFAULT '',
    reason     text        NOT NULL DEFAULT ''
);

-- The last few rejected deliveries of each configured source (issue 14,
-- point 7): when, why, from where, and the headers with every secret-bearing
-- value redacted. No body. Kept small by the receiver's recorder, which
-- samples refusals (a flood writes a bounded number of rows a minute) and
-- trims each source to its last N after each write. Owned by pkg/rejection.
CREATE TABLE hookinbox_rejection (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source      text        NOT NULL,
    rejected_at timestamptz NOT NULL DEFAULT now(),
    reason      text        NOT NULL,
    status      integer     NOT NULL,
    remote_addr text        NOT NULL DEFAULT '',
    request_id  text        NOT NULL DEFAULT '',
    headers     jsonb       NOT NULL DEFAULT '{}'
);

CREATE INDEX hookinbox_rejection_source_idx ON hookinbox_rejection (source, id);

-- Held events of a paused source: the worker marks them held_at (their job
-- completes), and resume finds them through this index without scanning the
-- inbox.
ALTER TABLE webhook_inbox ADD COLUMN held_at timestamptz;
CREATE INDEX webhook_inbox_held_idx ON webhook_inbox (source, id) WHERE status = 'pending' AND held_at IS NOT NULL;
