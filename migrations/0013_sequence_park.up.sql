-- Per-object sequencing (issue 26): a sequenced event that is not the next
-- of its key parks here, and its job ends, instead of snoozing and counting
-- its key again on every wake-up. The event of the key that runs wakes the
-- lowest parked one in its own transaction (a new job), under the key's
-- advisory lock, which parking takes too: a park and a wake cannot miss each
-- other. The reaper wakes a key whose parked events wait longer than
-- worker.orphan_after (its head failed for good, or was purged). Owned by
-- internal/inboxstore (sequence.go). No foreign key: a marker whose row is no
-- longer pending is skipped, and deleted when its key is woken.
CREATE TABLE hookinbox_sequence_park (
    inbox_id    bigint      PRIMARY KEY,
    source      text        NOT NULL,
    seq_key     text        NOT NULL,
    ord         numeric     NOT NULL,
    received_at timestamptz NOT NULL,
    parked_at   timestamptz NOT NULL DEFAULT now()
);

-- The wake: a key's parked events in sequence order.
CREATE INDEX hookinbox_sequence_park_key_idx ON hookinbox_sequence_park (source, seq_key, ord, received_at, inbox_id);
-- The reaper: the keys that have waited longest.
CREATE INDEX hookinbox_sequence_park_parked_at_idx ON hookinbox_sequence_park (parked_at);
