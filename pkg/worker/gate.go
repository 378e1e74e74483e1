package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river/rivertype"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// Backoff between runs of a transaction that met a serialization failure or
// a deadlock: doubling from the base, capped, with full jitter.
const (
	conflictBackoffBase = 2 * time.Millisecond
	conflictBackoffMax  = 250 * time.Millisecond
)

// isConflict reports whether err is a serialization failure or a deadlock:
// the SQLSTATEs a handler transaction is run again for, at once, because
// they say nothing about the event, only that it met a concurrent
// transaction.
func isConflict(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == pgerrcode.SerializationFailure || pgErr.Code == pgerrcode.DeadlockDetected)
}

// isSnooze reports whether err asks River to snooze the job.
func isSnooze(err error) bool {
	var snooze *rivertype.JobSnoozeError
	return errors.As(err, &snooze)
}

// txOptions are the options of an event's own transaction: its isolation
// level and, with asyncCommit, synchronous_commit off (see
// inboxstore.WorkTxOptions), in one round trip.
func txOptions(asyncCommit bool, iso Isolation) pgx.TxOptions {
	opts := inboxstore.WorkTxOptions(asyncCommit)
	if opts.BeginQuery == "" {
		opts.IsoLevel = iso.txIsoLevel()
		return opts
	}
	opts.BeginQuery = fmt.Sprintf("BEGIN ISOLATION LEVEL %s; SET LOCAL synchronous_commit = off", iso.txIsoLevel())
	return opts
}
