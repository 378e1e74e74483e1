package inboxstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// The durable BEGINs: a transaction begun with one of them commits at
// synchronous_commit = on at least (remote_write at least with
// durableBeginKeepingRemoteWrite), whatever the server, the database or the
// role sets. A weaker session value is raised for this transaction only:
// off (COMMIT waits for nothing) and local (it waits for the local WAL
// flush, never for a synchronous standby) always, and remote_write (the
// standby has written the WAL, not flushed it) unless it is kept. on and
// remote_apply are kept: a stronger setting is never weakened. Exec without
// arguments sends both statements in one simple-protocol message, one round
// trip, which PgBouncer in transaction mode passes on to one server
// connection; set_config(…, true) is SET LOCAL, undone at the transaction's
// end. current_setting gives the canonical name whatever alias set it
// (true, yes, 1 for on; false, no, 0 for off).
const (
	durableBegin                   = `BEGIN; SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')`
	durableBeginKeepingRemoteWrite = `BEGIN; SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') IN ('off', 'local')`
)

// DurableTxOptions are the options of a transaction whose commit a promise
// made outside PostgreSQL rests on: the receiver's claim, whose COMMIT is
// followed by a 2xx, the outbox relay's claim, after which a message leaves
// PostgreSQL, and the admin actions answered 2xx. Such a COMMIT returns
// only once its WAL is flushed and, when the server has a synchronous
// standby, once the standby has flushed it too (written it, with
// keepRemoteWrite and a session at remote_write: the receiver's claim
// under DurabilityConfig.KeepRemoteWrite), whatever synchronous_commit the
// server, the database or the role sets. ClaimLevel says at which level.
func DurableTxOptions(keepRemoteWrite bool) pgx.TxOptions {
	if keepRemoteWrite {
		return pgx.TxOptions{BeginQuery: durableBeginKeepingRemoteWrite}
	}
	return pgx.TxOptions{BeginQuery: durableBegin}
}

// ClaimLevel returns the synchronous_commit a transaction begun with
// DurableTxOptions(keepRemoteWrite) commits at, in a session whose own
// setting is session: on for off, local and (unless kept) remote_write;
// session otherwise.
func ClaimLevel(session string, keepRemoteWrite bool) string {
	switch {
	case session == "off", session == "local", session == "remote_write" && !keepRemoteWrite:
		return "on"
	default:
		return session
	}
}

// BeginDurableFunc runs fn in a transaction begun with DurableTxOptions on
// db (a pool or a connection), remote_write raised to on, committing when
// fn returns nil and rolling back otherwise, as pgx.BeginTxFunc does. A
// transaction rolled back by a conflict (PgConflict) runs again, fn with it,
// by the one retry policy (RetryConflicts, ConflictAttemptsDefault runs):
// fn must be safe to run again after a rollback. It is the control plane's
// transaction (the admin actions, replays, pauses, the outbox relay's claim).
func BeginDurableFunc(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}, fn func(pgx.Tx) error,
) error {
	return RetryConflicts(ctx, ConflictAttemptsDefault, func() error {
		return pgx.BeginTxFunc(ctx, db, DurableTxOptions(false), fn)
	}, nil)
}
