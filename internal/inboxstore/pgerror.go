package inboxstore

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"time"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
)

// PgClass is what a PostgreSQL error says about the transaction that met
// it. It is the one reading of SQLSTATEs: the claim, the take, the worker's
// group and the control plane all decide by it (ClassifyPg), and run a
// transaction again by one policy (RetryConflicts).
type PgClass uint8

const (
	// PgOther is any other error: not PostgreSQL's (the connection is
	// gone, the context ended), or a SQLSTATE of no class here. Nothing is
	// known about running it again.
	PgOther PgClass = iota
	// PgConflict is a serialization failure (40001) or a deadlock (40P01):
	// the transaction met a concurrent one and was rolled back; run again as
	// is, it may well succeed. It says nothing about the rows. A unique
	// violation (23505) is not one: the claim never meets it (it skips
	// conflicting rows), and elsewhere it is the rows' (PgData).
	PgConflict
	// PgLockTimeout is a lock wait that lock_timeout ended (55P03): another
	// transaction held the lock. Transient, like PgConflict, but the wait
	// was the caller's bound, so it is not retried at once.
	PgLockTimeout
	// PgCanceled is a statement cancelled (57014), by statement_timeout or
	// a cancel request: the statement was slow, not wrong.
	PgCanceled
	// PgData is a data exception (class 22, such as a value jsonb refuses)
	// or an integrity constraint violation (class 23): the rows themselves
	// are at fault, and the same rows fail again; a transaction without
	// them would not.
	PgData
)

// ClassifyPg returns the class of err's PostgreSQL error (PgOther when err
// wraps none).
func ClassifyPg(err error) PgClass {
	code := SQLState(err)
	switch {
	case code == "":
		return PgOther
	case code == pgerrcode.SerializationFailure, code == pgerrcode.DeadlockDetected:
		return PgConflict
	case code == pgerrcode.LockNotAvailable:
		return PgLockTimeout
	case code == pgerrcode.QueryCanceled:
		return PgCanceled
	case pgerrcode.IsDataException(code), pgerrcode.IsIntegrityConstraintViolation(code):
		return PgData
	}
	return PgOther
}

// Contended reports whether another transaction's locks caused the error:
// a conflict or a lock timeout. The event's row says nothing against it;
// worked alone, later, it may succeed (the worker's group defers such an
// event).
func (c PgClass) Contended() bool { return c == PgConflict || c == PgLockTimeout }

// Unavailable reports whether err says PostgreSQL could not be reached or
// the connection was lost, not that the statement was wrong: a connection
// that could not be made, one that closed or broke under the statement
// (PostgreSQL restarting, a backend terminated), a connection exception
// (SQLSTATE class 08), or a server shutting down or starting
// (57P01-57P03). What met it may succeed once the database is back. A
// connection that could not be made counts whatever ended it (a connect
// timeout too); otherwise a context that ended is the caller's bound on the
// statement, not the database's absence.
func Unavailable(err error) bool {
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	code := SQLState(err)
	switch {
	case err == nil:
		return false
	case errors.As(err, &connectErr):
		// Whatever ended it, a timeout included: on a busy machine or a
		// restarting server, a connection can take longer than its bound.
		return true
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// The caller's own bound on a statement, not the database's absence.
		return false
	case pgconn.SafeToRetry(err), errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case pgerrcode.IsConnectionException(code), code == pgerrcode.AdminShutdown,
		code == pgerrcode.CrashShutdown, code == pgerrcode.CannotConnectNow:
		return true
	}
	return false
}

// SQLState returns the SQLSTATE of err's PostgreSQL error, "" when err wraps
// none. A trace or a metric keeps it instead of the error's message, which
// may quote the data (a payload that jsonb refused).
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// The one retry policy's backoff: doubling from the base, capped, with full
// jitter.
const (
	conflictBackoffBase = 2 * time.Millisecond
	conflictBackoffMax  = 250 * time.Millisecond
)

// ConflictAttemptsDefault is how many times the claim and the control
// plane's durable transactions (BeginDurableFunc) run a transaction that
// keeps meeting conflicts (PgConflict), the first run included.
const ConflictAttemptsDefault = 3

// RetryConflicts is the one retry policy: it runs fn, a whole transaction,
// and runs it again while it fails with a conflict (PgConflict), after a
// backoff doubling from 2 ms up to 250 ms with full jitter, up to attempts
// runs in all. Any other error, or the last run's, is returned as is, as is
// the conflict when ctx ends during a backoff. onRetry, when not nil, is
// told of each retry (its number from 1, the backoff, the conflict) before
// its backoff.
func RetryConflicts(ctx context.Context, attempts int, fn func() error, onRetry func(retry int, backoff time.Duration, err error)) error {
	for try := 0; ; try++ {
		err := fn()
		if err == nil || ClassifyPg(err) != PgConflict || try >= attempts-1 {
			return err
		}
		backoff := min(conflictBackoffBase<<try, conflictBackoffMax)
		backoff = time.Duration(rand.Int64N(int64(backoff))) + 1 //nolint:gosec // jitter, not a secret
		if onRetry != nil {
			onRetry(try+1, backoff, err)
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return err
		case <-timer.C:
		}
	}
}
