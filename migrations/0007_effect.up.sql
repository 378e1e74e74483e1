-- Business effects (pkg/effect): the latest snapshot of every object, kept
-- by a version guard, and the effect keys of effect.Once. Owned by
-- pkg/effect; neither table refers to webhook_inbox, so pruning or replaying
-- the inbox never touches them.

-- The latest snapshot of each object: one row per (source, kind, object_id),
-- written only by effect.Snapshots.Upsert, whose guard lets a write through
-- only when its ordering tuple (version, event_time, received_at, inbox_id)
-- is greater than the row's (see pkg/effect, "The tie rule").
CREATE TABLE hookinbox_snapshot (
    source      text        NOT NULL,
    kind        text        NOT NULL,
    object_id   text        NOT NULL,
    -- A revision counter, or a timestamp in Unix microseconds.
    version     bigint      NOT NULL,
    -- The provider's event time; the first tie-breaker.
    event_time  timestamptz NOT NULL,
    -- The inbox row that wrote the snapshot: the last tie-breakers.
    received_at timestamptz NOT NULL,
    inbox_id    bigint      NOT NULL,
    event_id    text        NOT NULL,
    payload     jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, kind, object_id)
);

-- effect.Once's keys: a row per business effect applied. Retention is its
-- own (effect.PruneOnce), independent of the inbox's.
CREATE TABLE hookinbox_effect_once (
    scope      text        NOT NULL,
    key        text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (scope, key)
);

CREATE INDEX hookinbox_effect_once_created_at_idx ON hookinbox_effect_once (created_at);
