-- The database server as the reaper last saw it (issue 43): the start of its
-- postmaster and its WAL timeline, which a restart and a promotion of a
-- standby change, and when the reaper first saw them. Within
-- worker.orphan_after of seen_at the reaper looks for the commits an outage
-- lost at every pass. One row. After a promotion the row is the old
-- primary's, replicated (or none): the new timeline differs from it. Owned by
-- internal/inboxstore (server.go).
CREATE TABLE hookinbox_server_seen (
    id               boolean     PRIMARY KEY DEFAULT true CHECK (id),
    postmaster_start timestamptz NOT NULL,
    timeline         text        NOT NULL,
    seen_at          timestamptz NOT NULL
);
