package inboxstore

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// durableBegin opens a transaction and, when the session's
// synchronous_commit is off (set so at the server, the database or the
// role), raises it to on for this transaction only. Every other value
// (local, remote_write, on, remote_apply) already makes COMMIT wait for the
// local WAL flush and is kept: a stronger one is never weakened. Exec
// without arguments sends both statements in one simple-protocol message,
// one round trip, which PgBouncer in transaction mode passes on to one
// server connection; set_config(…, true) is SET LOCAL, undone at the
// transaction's end.
const durableBegin = `BEGIN; SELECT set_config('synchronous_commit', 'on', true) WHERE current_setting('synchronous_commit') = 'off'`

// DurableTxOptions are the options of a transaction whose commit a promise
// made outside PostgreSQL rests on: the receiver's claim, whose COMMIT is
// followed by a 2xx, the outbox relay's claim, after which a message leaves
// PostgreSQL, and the admin actions answered 2xx. Such a COMMIT returns
// only once its WAL is flushed, whatever synchronous_commit the server, the
// database or the role sets.
func DurableTxOptions() pgx.TxOptions {
	return pgx.TxOptions{BeginQuery: durableBegin}
}

// BeginDurableFunc runs fn in a transaction begun with DurableTxOptions on
// db (a pool or a connection), committing when fn returns nil and rolling
// back otherwise, as pgx.BeginTxFunc does.
func BeginDurableFunc(ctx context.Context, db interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}, fn func(pgx.Tx) error,
) error {
	return pgx.BeginTxFunc(ctx, db, DurableTxOptions(), fn)
}
