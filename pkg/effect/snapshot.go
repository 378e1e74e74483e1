package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DBTX is the subset of pgx that both *pgxpool.Pool and pgx.Tx satisfy.
type DBTX interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Outcome is what Upsert did.
type Outcome string

// The outcomes of Upsert.
const (
	// Inserted: the object had no snapshot.
	Inserted Outcome = "inserted"
	// Updated: the snapshot replaced an older one.
	Updated Outcome = "updated"
	// Stale: the stored snapshot is as new or newer; nothing was written.
	Stale Outcome = "stale"
)

// Tie is the rule for two snapshots of one object with the same version
// (see the package documentation).
type Tie string

// The tie rules.
const (
	// TieArrival breaks a version tie by the provider's event time, then by
	// the inbox's received_at, then by the inbox id: the later wins.
	TieArrival Tie = "arrival"
	// TieKeepFirst keeps the snapshot written first when versions tie.
	TieKeepFirst Tie = "keep_first"
	// TieDefault is the rule used when none is given.
	TieDefault = TieArrival
)

// ParseTie parses a tie rule's name; "" is TieDefault.
func ParseTie(s string) (Tie, error) {
	switch Tie(s) {
	case "":
		return TieDefault, nil
	case TieArrival, TieKeepFirst:
		return Tie(s), nil
	}
	return "", fmt.Errorf("unknown tie rule %q (want %q or %q)", s, TieArrival, TieKeepFirst)
}

// Snapshot is an object's state as one event carried it.
type Snapshot struct {
	// Source is the inbox source the event came from.
	Source string
	// Kind is the object's kind ("customer", "orders", "payment").
	Kind string
	// ObjectID identifies the object within its source and kind.
	ObjectID string
	// Version orders the snapshots of one object: a revision counter, or a
	// timestamp in Unix microseconds.
	Version int64
	// EventTime is the provider's event time, the first tie-breaker. Zero
	// means ReceivedAt.
	EventTime time.Time
	// ReceivedAt and InboxID are the inbox row's, the last tie-breakers.
	ReceivedAt time.Time
	InboxID    int64
	// EventID is the provider's event id, kept for audit.
	EventID string
	// Payload is stored as the object's state.
	Payload json.RawMessage
}

// ErrInvalidSnapshot is returned for a snapshot missing a required field.
var ErrInvalidSnapshot = errors.New("effect: invalid snapshot")

// upsertPrefix inserts the snapshot or updates the stored one; the guard
// and the RETURNING clause follow.
const upsertPrefix = `
INSERT INTO hookinbox_snapshot AS cur (source, kind, object_id, version, event_time, received_at, inbox_id, event_id, payload)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (source, kind, object_id) DO UPDATE
SET version = EXCLUDED.version, event_time = EXCLUDED.event_time, received_at = EXCLUDED.received_at,
    inbox_id = EXCLUDED.inbox_id, event_id = EXCLUDED.event_id, payload = EXCLUDED.payload, updated_at = now()
`

// The guards, one per tie rule.
var guards = map[Tie]string{
	TieArrival: `WHERE (cur.version, cur.event_time, cur.received_at, cur.inbox_id)
    < (EXCLUDED.version, EXCLUDED.event_time, EXCLUDED.received_at, EXCLUDED.inbox_id)`,
	TieKeepFirst: `WHERE cur.version < EXCLUDED.version`,
}

// How an insert is told from an update: xmax = 0 up to PostgreSQL 17,
// RETURNING old/new from 18 on.
const (
	returningXmax   = "\nRETURNING (cur.xmax = 0)"
	returningOldNew = "\nRETURNING (old.object_id IS NULL)"
)

// Upsert writes s through the version guard in tx and reports what it did.
// tie "" is TieDefault.
func Upsert(ctx context.Context, tx pgx.Tx, s *Snapshot, tie Tie) (Outcome, error) {
	if s.Source == "" || s.Kind == "" || s.ObjectID == "" {
		return "", fmt.Errorf("%w: source, kind and object id are required (got %q, %q, %q)", ErrInvalidSnapshot, s.Source, s.Kind, s.ObjectID)
	}
	tie, err := ParseTie(string(tie))
	if err != nil {
		return "", err
	}
	returning := returningXmax
	if serverVersionNum(tx.Conn().PgConn()) >= 180000 {
		returning = returningOldNew
	}
	eventTime := s.EventTime
	if eventTime.IsZero() {
		eventTime = s.ReceivedAt
	}
	payload := s.Payload
	if payload == nil {
		payload = json.RawMessage("null")
	}
	var inserted bool
	err = tx.QueryRow(ctx, upsertPrefix+guards[tie]+returning,
		s.Source, s.Kind, s.ObjectID, s.Version, eventTime, s.ReceivedAt, s.InboxID, s.EventID, string(payload)).Scan(&inserted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Stale, nil
	case err != nil:
		return "", fmt.Errorf("effect: upsert snapshot %s/%s/%s: %w", s.Source, s.Kind, s.ObjectID, err)
	case inserted:
		return Inserted, nil
	default:
		return Updated, nil
	}
}

// serverVersionNum returns the server's version as server_version_num
// would (150004 for 15.4), from the parameters the server reported when the
// connection started; 0 when it cannot tell.
func serverVersionNum(conn *pgconn.PgConn) int {
	if n, err := strconv.Atoi(conn.ParameterStatus("server_version_num")); err == nil {
		return n
	}
	return parseServerVersion(conn.ParameterStatus("server_version"))
}

// parseServerVersion turns "15.4 (Debian 15.4-1)" or "18beta1" into
// server_version_num's form.
func parseServerVersion(v string) int {
	end := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if end >= 0 {
		v = v[:end]
	}
	parts := strings.SplitN(v, ".", 3)
	major, err := strconv.Atoi(parts[0])
	if err != nil {
		return 0
	}
	minor := 0
	if len(parts) > 1 {
		minor, _ = strconv.Atoi(parts[1])
	}
	if major >= 10 {
		return major*10000 + minor
	}
	return major*10000 + minor*100
}
