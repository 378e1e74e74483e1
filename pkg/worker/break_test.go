package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// Adversarial tests of issue 38's change (f20680b): each fails on it.

// limitedRolePool returns a pool of maxConns connections on the bundle's
// database, as a role of its own (returned), which the server lets open at
// most limit connections (-1: no limit), as a server's max_connections
// bounds a process.
func (b *testBundle) limitedRolePool(t *testing.T, limit int, maxConns int32) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	server := newPool(t, dbtest.ServerURL(t))
	role := fmt.Sprintf("hookinbox_budget_%d", time.Now().UnixNano())
	_, err := server.Exec(ctx, fmt.Sprintf(`CREATE ROLE %s LOGIN CONNECTION LIMIT %d`, role, limit))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = server.Exec(context.Background(), `DROP ROLE IF EXISTS `+role) })
	_, err = b.db.Pool.Exec(ctx, `
GRANT USAGE ON SCHEMA public TO `+role+`;
GRANT ALL ON ALL TABLES IN SCHEMA public TO `+role+`;
GRANT ALL ON ALL SEQUENCES IN SCHEMA public TO `+role+`;`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = b.db.Pool.Exec(context.Background(), `REASSIGN OWNED BY `+role+` TO postgres; DROP OWNED BY `+role)
	})
	cfg, err := pgxpool.ParseConfig(b.db.URL)
	require.NoError(t, err)
	cfg.ConnConfig.User = role
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, role
}

func TestBreakWorkerStaysWithinMaxConns(t *testing.T) {
	t.Parallel()

	// docs/deploying.md: "Each process opens up to database.max_conns", and
	// the daemon's start-up check lets a worker start whose max_conns is
	// all the server allows. A load that fills the worker's pool (16, the
	// default) leaves it with max_conns connections open, and one more:
	// the connection River's LISTEN takes out of the pool (hijacked: the
	// pool opens another in its place; so it was before issue 38). No
	// more: on a server that allows exactly that, a connection the worker
	// cannot open fails an event whose handlers never ran.
	b := setup(t)
	ctx := context.Background()
	const maxConns = 16
	pool, role := b.limitedRolePool(t, -1, maxConns)
	b.startDefaults(t, pool, func(c *worker.Config) { c.Routes = []worker.Route{{Source: "bank", Handlers: []string{"effect"}}} })
	const n = 600
	for i := range n {
		b.ingest(t, fmt.Sprintf("evt_%04d", i), "account.deposit")
	}
	poll(t, 120*time.Second, "every event to be done", func() (bool, error) {
		c, err := b.store.Count(ctx, nil)
		return err == nil && c.Done == n, err
	})
	// Idle connections stay open (pgxpool's max_conn_idle_time is 30 min).
	var open int
	require.NoError(t, b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM pg_stat_activity WHERE usename = $1`, role).Scan(&open))
	require.LessOrEqual(t, open, maxConns+1, "connections the worker opened, River's LISTEN included")
}

func TestBreakPauseSeenAfterAStartThatFailed(t *testing.T) {
	t.Parallel()

	// Start's doc: when it fails, "Start may be called again". A first
	// Start whose claim of the routes record fails (here the role may not
	// write hookinbox_worker_routes; in production a connection refused)
	// must leave a worker whose second Start works as a first one would:
	// a pause takes effect within pause_refresh.
	b := setup(t)
	ctx := context.Background()
	pool, role := b.limitedRolePool(t, -1, 16)
	_, err := b.db.Pool.Exec(ctx, `REVOKE ALL ON hookinbox_worker_routes FROM `+role)
	require.NoError(t, err)
	cfg := &worker.Config{
		Sources: sources, Registry: b.registry(t), Logger: zaptest.NewLogger(t), PauseRefresh: 100 * time.Millisecond,
		Routes: []worker.Route{{Source: "bank", Handlers: []string{"effect"}}},
	}
	w, err := worker.New(pool, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		require.NoError(t, w.Stop(ctx))
	})
	require.Error(t, w.Start(ctx), "the claim fails")
	_, err = b.db.Pool.Exec(ctx, `GRANT ALL ON hookinbox_worker_routes TO `+role)
	require.NoError(t, err)
	require.NoError(t, w.Start(ctx))
	require.Equal(t, worker.StateWorking, w.State())

	_, err = b.store.Pause(ctx, "bank", "test", "")
	require.NoError(t, err)
	deadline := time.Now().Add(5 * time.Second)
	for !w.SeesPaused("bank") && time.Now().Before(deadline) {
		<-time.After(10 * time.Millisecond)
	}
	id := b.ingest(t, "evt_after_pause", "account.deposit")
	poll(t, 30*time.Second, "the event's job to end", func() (bool, error) {
		var open int
		err := b.db.Pool.QueryRow(ctx, `
SELECT count(*) FROM river_job WHERE kind = 'hookinbox.event' AND state NOT IN ('completed', 'discarded', 'cancelled')`).Scan(&open)
		return open == 0, err
	})
	require.Zero(t, b.effects(t, "evt_after_pause"), "an event received 5 s after the pause was handled")
	require.Equal(t, inbox.StatusPending, b.row(t, id).Status)
}
