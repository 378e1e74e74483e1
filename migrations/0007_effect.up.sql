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

-- Per-object sequencing (pkg/worker, sequence.go): the greatest position
-- (order, received_at, inbox_id) processed so far for each sequence key. An
-- event processed behind it is late, and reported so.
CREATE TABLE hookinbox_sequence (
    source      text        NOT NULL,
    seq_key     text        NOT NULL,
    ord         numeric     NOT NULL,
    received_at timestamptz NOT NULL,
    inbox_id    bigint      NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, seq_key)
);

-- A sequence position's order as a number: an integer as is, an ISO 8601 /
-- RFC 3339 time in Unix microseconds (as pkg/effect reads versions), NULL
-- for anything else.
CREATE FUNCTION hookinbox_sequence_order(v text) RETURNS numeric
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT CASE
        WHEN v ~ '^-?[0-9]+$' THEN v::numeric
        WHEN v ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}' THEN floor(extract(epoch FROM v::timestamptz) * 1000000)
    END
$$;
