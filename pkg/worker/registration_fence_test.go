package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func TestOnlyWorkingRecordsUnfence(t *testing.T) {
	t.Parallel()

	// A worker fenced itself (nothing extended its records for fenceAfter)
	// and its records expired; a worker with other routes took the queue.
	// What brings the first back to the database must leave it fenced:
	// the claim that finds the other working records it waiting, the
	// renewals of those waiting records extend nothing it may work on,
	// and a renewal never revives a record that expired. (TestAWorkerThat
	// CannotRenewFencesItself drives the whole path; its drain may end
	// before a renewal, which this test does not leave to timing.)
	ctx := context.Background()
	db := dbtest.New(t)
	r := &registration{
		pool: db.Pool, id: "a", host: "test", pid: 1, queues: []string{"default"}, routes: []string{"bank * -> a"},
		interval: time.Second, base: time.Now(),
	}
	blocker, err := r.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	require.False(t, r.fenced())
	// Its last extension an hour ago, on the clock fenced reads.
	r.base = r.base.Add(-time.Hour)
	require.True(t, r.fenced())

	// A renewal of a record that expired, not yet deleted, revives nothing.
	_, err = db.Pool.Exec(ctx, `UPDATE hookinbox_worker_routes SET expires_at = now() - interval '1 second'`)
	require.NoError(t, err)
	ok, err := r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok, "an expired record was renewed")
	require.True(t, r.fenced())

	// Another route set's worker claims the queue: it deletes the expired
	// record and works.
	b := &registration{
		pool: db.Pool, id: "b", host: "test", pid: 2, queues: []string{"default"}, routes: []string{"bank * -> b"},
		interval: time.Hour, base: time.Now(),
	}
	blocker, err = b.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)

	ok, err = r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok, "the record is gone")
	blocker, err = r.claim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker)
	require.Equal(t, "bank * -> b", blocker.TheirRoutes)
	require.True(t, r.fenced(), "the claim that found b working unfenced the worker")
	ok, err = r.renew(ctx)
	require.NoError(t, err)
	require.True(t, ok, "the waiting record lives")
	require.True(t, r.fenced(), "the renewal of a waiting record unfenced the worker")
}

func TestAReclaimThatFindsAnotherRouteSetLeavesNoRecord(t *testing.T) {
	t.Parallel()

	// A working worker's record expired (not deleted yet), and a newer
	// route set waits on its queue. Its renewal revives nothing; its
	// reclaim finds the newer set, deletes its record and stays fenced;
	// the newer set then takes the queue at its next claim. A waiting
	// record left by the reclaim, renewed while the worker drains, would
	// tell an older set working the queue that a newer one waits for it.
	ctx := context.Background()
	db := dbtest.New(t)
	r := &registration{
		pool: db.Pool, id: "a", host: "test", pid: 1, queues: []string{"default"}, routes: []string{"bank * -> a"},
		interval: time.Second, base: time.Now(),
	}
	blocker, err := r.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	c := &registration{
		pool: db.Pool, id: "c", host: "test", pid: 3, queues: []string{"default"}, routes: []string{"bank * -> c"},
		interval: time.Hour, base: time.Now(),
	}
	blocker, err = c.claim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker, "c waits for a")
	r.base = r.base.Add(-time.Hour)
	_, err = db.Pool.Exec(ctx, `UPDATE hookinbox_worker_routes SET expires_at = now() - interval '1 second' WHERE worker_id = 'a'`)
	require.NoError(t, err)

	ok, err := r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	blocker, err = r.reclaim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker)
	require.Equal(t, recordWaiting, blocker.State)
	require.True(t, r.fenced())
	var left int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_worker_routes WHERE worker_id = 'a'`).Scan(&left))
	require.Zero(t, left, "the reclaim left a record")
	ok, err = r.renew(ctx)
	require.NoError(t, err)
	require.False(t, ok)
	require.True(t, r.fenced())

	blocker, err = c.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker, "c takes the queue")
}
