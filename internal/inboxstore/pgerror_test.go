package inboxstore_test

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func TestUnavailable(t *testing.T) {
	t.Parallel()

	// The errors PostgreSQL and pgx give when the database is out of reach
	// or the connection is lost, which a worker's start retries (the soak's
	// seed 202 saw a worker exit 1 on "register routes: conn closed" after
	// a PostgreSQL restart), and those it must not.
	ctx := context.Background()
	db := dbtest.New(t)

	conn, err := pgx.Connect(ctx, db.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pid int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	_, err = db.Pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
	require.NoError(t, err)
	_, terminated := conn.Exec(ctx, `SELECT 1`)
	require.Error(t, terminated)
	require.True(t, inboxstore.Unavailable(terminated), "terminated backend: %v", terminated)
	_, closed := conn.Exec(ctx, `SELECT 1`)
	require.Error(t, closed)
	require.True(t, inboxstore.Unavailable(closed), "closed connection: %v", closed)

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	u.Host = ln.Addr().String()
	require.NoError(t, ln.Close())
	_, refused := pgx.Connect(ctx, u.String())
	require.Error(t, refused)
	require.True(t, inboxstore.Unavailable(refused), "refused: %v", refused)

	// A server that accepts and never answers: the connect times out (the
	// soak's seed 202 saw River's start fail so under load, and the worker
	// exit 1).
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	accepted := make(chan net.Conn, 8)
	go func() {
		defer close(accepted)
		for {
			c, err := mute.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	defer func() {
		mute.Close()
		for c := range accepted {
			c.Close()
		}
	}()
	u.Host = mute.Addr().String()
	connectCtx, cancelConnect := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelConnect()
	_, connectTimeout := pgx.Connect(connectCtx, u.String())
	require.ErrorIs(t, connectTimeout, context.DeadlineExceeded)
	require.True(t, inboxstore.Unavailable(connectTimeout), "connect timeout: %v", connectTimeout)

	_, syntax := db.Pool.Exec(ctx, `SELEC 1`)
	require.Error(t, syntax)
	require.False(t, inboxstore.Unavailable(syntax), "syntax error: %v", syntax)
	_, dup := db.Pool.Exec(ctx, `CREATE TABLE u (id int PRIMARY KEY); INSERT INTO u VALUES (1), (1)`)
	require.Error(t, dup)
	require.False(t, inboxstore.Unavailable(dup), "unique violation: %v", dup)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, canceled := db.Pool.Exec(cancelled, `SELECT 1`)
	require.Error(t, canceled)
	require.False(t, inboxstore.Unavailable(canceled), "context canceled: %v", canceled)
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancelShort()
	_, timedOut := db.Pool.Exec(short, `SELECT pg_sleep(5)`)
	require.Error(t, timedOut)
	require.False(t, inboxstore.Unavailable(timedOut), "deadline mid-statement: %v", timedOut)
	require.False(t, inboxstore.Unavailable(nil))
}
