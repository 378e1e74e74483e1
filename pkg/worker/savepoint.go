package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// savepointName is the savepoint each grouped event's handlers run after.
const savepointName = "hookinbox_event"

// errEventTxEnd is what a grouped event's handler gets when it tries to end
// the transaction its group shares.
var errEventTxEnd = errors.New("worker: a handler must not commit or roll back the event's transaction")

// groupSavepoints is a group transaction's savepoint state, shared by the
// eventTx of each of its events in turn.
type groupSavepoints struct {
	tx pgx.Tx
	// open: an earlier event's savepoint is still open; the next one
	// releases it first, so that savepoints never nest deeper than one.
	open bool
	// settings are the group's SET LOCAL statements (groupSettings), run
	// with the first savepoint: a group whose handlers run no statement
	// needs none.
	settings []string
	// settled: settings ran.
	settled bool
	// err is a savepoint that could not be made: the group must not
	// commit, since an event's writes might not be undoable alone.
	err error
}

// eventTx is the pgx.Tx a grouped event's handlers get. The event's
// savepoint is made lazily, in the round trip of the handlers' first
// statement: an event whose handlers run no statement costs no round trip,
// and one whose handlers do pays none extra (Exec sends the savepoint and
// the statement together; the other methods make the savepoint first). So
// the savepoint exists before any statement of the event runs, which is
// what lets ROLLBACK TO SAVEPOINT undo exactly this event's writes; and if
// none was made, the handlers wrote nothing and there is nothing to undo.
type eventTx struct {
	pgx.Tx
	group *groupSavepoints
	// set: this event's savepoint exists.
	set bool
}

// newEventTx starts the next event of the group.
func (g *groupSavepoints) newEventTx() *eventTx {
	return &eventTx{Tx: g.tx, group: g}
}

// prelude is what must run before the event's first statement.
func (e *eventTx) prelude() []string {
	var q []string
	if !e.group.settled {
		q = append(q, e.group.settings...)
	}
	if e.group.open {
		q = append(q, "RELEASE SAVEPOINT "+savepointName)
	}
	return append(q, "SAVEPOINT "+savepointName)
}

// made records that the prelude ran.
func (e *eventTx) made() {
	e.set, e.group.open, e.group.settled = true, true, true
}

// ensure makes the event's savepoint, in a round trip of its own, unless
// it exists.
func (e *eventTx) ensure(ctx context.Context) error {
	if e.set {
		return nil
	}
	if _, err := e.Tx.Exec(ctx, strings.Join(e.prelude(), "; ")); err != nil {
		e.group.err = fmt.Errorf("savepoint: %w", err)
		return e.group.err
	}
	e.made()
	return nil
}

// rollback undoes the event's writes, if it made any.
func (e *eventTx) rollback(ctx context.Context) error {
	if !e.set {
		return nil
	}
	if _, err := e.Tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+savepointName); err != nil {
		return fmt.Errorf("rollback to savepoint: %w", err)
	}
	return nil
}

// Exec runs sql after the event's savepoint, in one round trip with it.
func (e *eventTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if e.set {
		return e.Tx.Exec(ctx, sql, args...)
	}
	if len(args) == 0 {
		return e.execSimple(ctx, sql)
	}
	if _, option := args[0].(pgx.QueryExecMode); option {
		// A batch takes no per-statement mode.
		if err := e.ensure(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		return e.Tx.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	prelude := e.prelude()
	for _, q := range prelude {
		b.Queue(q)
	}
	b.Queue(sql, args...)
	br := e.Tx.SendBatch(ctx, b)
	for range prelude {
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			e.group.err = fmt.Errorf("savepoint: %w", err)
			return pgconn.CommandTag{}, e.group.err
		}
	}
	e.made()
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// execSimple runs the prelude and sql (no arguments: pgx would use the
// simple protocol, where sql may hold several statements) as one simple
// query, and tells by the results read whether the savepoint was made.
func (e *eventTx) execSimple(ctx context.Context, sql string) (pgconn.CommandTag, error) {
	prelude := e.prelude()
	mrr := e.Tx.Conn().PgConn().Exec(ctx, strings.Join(prelude, "; ")+"; "+sql)
	var (
		tag  pgconn.CommandTag
		done int
	)
	for mrr.NextResult() {
		var err error
		if tag, err = mrr.ResultReader().Close(); err != nil {
			break
		}
		if done++; done == len(prelude) {
			e.made()
		}
	}
	if err := mrr.Close(); err != nil {
		if done < len(prelude) {
			e.group.err = fmt.Errorf("savepoint: %w", err)
			return pgconn.CommandTag{}, e.group.err
		}
		return pgconn.CommandTag{}, err
	}
	return tag, nil
}

// Query runs sql after the event's savepoint.
func (e *eventTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := e.ensure(ctx); err != nil {
		return nil, err
	}
	return e.Tx.Query(ctx, sql, args...)
}

// QueryRow runs sql after the event's savepoint.
func (e *eventTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := e.ensure(ctx); err != nil {
		return errRow{err}
	}
	return e.Tx.QueryRow(ctx, sql, args...)
}

// SendBatch runs b after the event's savepoint (if that cannot be made,
// the group does not commit, whatever b does).
func (e *eventTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	_ = e.ensure(ctx)
	return e.Tx.SendBatch(ctx, b)
}

// CopyFrom copies after the event's savepoint.
func (e *eventTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := e.ensure(ctx); err != nil {
		return 0, err
	}
	return e.Tx.CopyFrom(ctx, table, columns, src)
}

// Prepare prepares sql after the event's savepoint.
func (e *eventTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := e.ensure(ctx); err != nil {
		return nil, err
	}
	return e.Tx.Prepare(ctx, name, sql)
}

// Begin starts a nested pseudo transaction after the event's savepoint.
func (e *eventTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := e.ensure(ctx); err != nil {
		return nil, err
	}
	return e.Tx.Begin(ctx)
}

// LargeObjects gives access to large objects; the event's savepoint is
// made first (with a context of its own: LargeObjects takes none; if it
// cannot be made, the group does not commit).
func (e *eventTx) LargeObjects() pgx.LargeObjects {
	_ = e.ensure(context.Background())
	return e.Tx.LargeObjects()
}

// Conn returns the connection after making the event's savepoint: what a
// handler runs on it directly must be undone with the event too (if the
// savepoint cannot be made, the group does not commit).
func (e *eventTx) Conn() *pgx.Conn {
	_ = e.ensure(context.Background())
	return e.Tx.Conn()
}

// Commit refuses: the group commits once all its events ran.
func (e *eventTx) Commit(context.Context) error { return errEventTxEnd }

// Rollback refuses: a failing handler returns its error instead.
func (e *eventTx) Rollback(context.Context) error { return errEventTxEnd }

// errRow is a pgx.Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// handlerTx is the pgx.Tx an event worked in a transaction of its own
// gives its handlers: like eventTx, it refuses to end the transaction,
// which also holds the event's done mark.
type handlerTx struct{ pgx.Tx }

// Commit refuses: the event's transaction commits once its handlers ran.
func (handlerTx) Commit(context.Context) error { return errEventTxEnd }

// Rollback refuses: a failing handler returns its error instead.
func (handlerTx) Rollback(context.Context) error { return errEventTxEnd }
