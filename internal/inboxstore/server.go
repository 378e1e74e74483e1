package inboxstore

import (
	"context"
	"fmt"
	"time"
)

// ServerSight is what NoteServer found.
type ServerSight struct {
	// Changed is true when the server is not the one noted last: it
	// restarted, a standby was promoted, or none was noted yet.
	Changed bool
	// Since is when the server was first noted.
	Since time.Time
	// Recent is true while Since is less than NoteServer's window ago, by
	// the database's clock.
	Recent bool
}

// NoteServer notes, in the caller's transaction, the database server it
// runs on (hookinbox_server_seen): the start of its postmaster, which a
// restart changes, and its WAL timeline (the first eight digits of the
// current WAL file's name), which a promotion changes at once. The
// timeline of pg_control_checkpoint() would do only after the promoted
// server's first checkpoint, which may be minutes later. Both functions
// are open to every role.
//
// It returns when the server was first noted and whether that is less
// than window ago: the reaper looks for lost commits while it is (see
// OrphanQuery.LostCommits). After a promotion the row is the old
// primary's (replicated) or missing, so the first note on the new primary
// sees a change, whichever worker makes it.
func (s *Store) NoteServer(ctx context.Context, db DBTX, window time.Duration) (*ServerSight, error) {
	var sight ServerSight
	err := db.QueryRow(ctx, `
WITH noted AS (
    INSERT INTO hookinbox_server_seen AS s (postmaster_start, timeline, seen_at)
    VALUES (pg_postmaster_start_time(), substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8), now())
    ON CONFLICT (id) DO UPDATE SET postmaster_start = excluded.postmaster_start, timeline = excluded.timeline, seen_at = excluded.seen_at
    WHERE (s.postmaster_start, s.timeline) IS DISTINCT FROM (excluded.postmaster_start, excluded.timeline)
    RETURNING seen_at
), since AS (
    SELECT coalesce((SELECT seen_at FROM noted), (SELECT seen_at FROM hookinbox_server_seen)) AS at
)
SELECT EXISTS (SELECT 1 FROM noted), at, now() < at + $1 * interval '1 millisecond' FROM since`,
		window.Milliseconds()).Scan(&sight.Changed, &sight.Since, &sight.Recent)
	if err != nil {
		return nil, fmt.Errorf("inbox: note the server: %w", err)
	}
	return &sight, nil
}
