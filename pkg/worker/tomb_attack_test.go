package worker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func TestAClaimOnAnotherQueueKeepsTheMark(t *testing.T) {
	t.Parallel()

	// TestAnOlderSetNeverWorksAQueueAfterANewerOne, in an installation
	// with a second queue: between the outage that expired both sets'
	// records and the older set's reclaim, a worker of the other queue
	// claims it (it starts, or a waiting one polls). That claim's cleanup
	// must not delete the mark of the newer set on the first queue, or the
	// older set works the queue again and the rollout goes backwards.
	ctx := context.Background()
	db := dbtest.New(t)
	older, newer := testRegistration(db, "older", time.Second, "default"), testRegistration(db, "newer", time.Second, "default")
	blocker, err := older.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	blocker, err = newer.claim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker)
	expireRecords(t, db, "older")
	blocker, err = newer.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker, "newer takes the queue over")

	// The outage: both expire.
	expireRecords(t, db, "newer")
	// A worker of another queue claims it.
	blocker, err = testRegistration(db, "slow", time.Second, "slow").claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)

	blocker, err = older.reclaim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker, "the older set works the queue again after the newer one did: a claim on another queue deleted the mark")
	require.True(t, blocker.Expired)
}

func TestAMarkBlocksOnlyOlderSetsWithOtherRoutes(t *testing.T) {
	t.Parallel()

	// A newer set's mark on "default" (its worker, working, then out of
	// reach) blocks an older worker with other routes, on every queue it
	// claims; not an older worker with the mark's routes, nor a worker
	// that starts now (newest: its claim deletes the mark), nor claims of
	// other queues, which keep it.
	ctx := context.Background()
	db := dbtest.New(t)
	older := testRegistration(db, "older", time.Second, "default", "slow")
	_, err := older.claim(ctx)
	require.NoError(t, err)
	require.NoError(t, older.delete(ctx, zaptest.NewLogger(t))) // drained for mark, retired
	twin := testRegistration(db, "mark", time.Second, "default")
	twin.id = "twin"
	_, err = twin.claim(ctx) // the mark's routes, started before it
	require.NoError(t, err)
	mark := testRegistration(db, "mark", time.Second, "default")
	blocker, err := mark.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	require.NoError(t, twin.delete(ctx, zaptest.NewLogger(t)))
	expireRecords(t, db, "mark")

	// The older set, started before the mark, claims again (a reclaim).
	blocker, err = older.reclaim(ctx)
	require.NoError(t, err)
	require.NotNil(t, blocker)
	require.Equal(t, "default", blocker.Queue)
	require.True(t, blocker.Expired, "the mark reads as a live worker")
	// The twin (same routes, older than the mark) is not blocked.
	blocker, err = twin.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	require.NoError(t, twin.delete(ctx, zaptest.NewLogger(t)))
	// Claims of another queue keep the mark.
	blocker, err = testRegistration(db, "s", time.Second, "slow").claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	var marks int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_worker_routes WHERE worker_id = 'mark'`).Scan(&marks))
	require.Equal(t, 1, marks)
	// A brand-new worker of the older routes is newest: it works, and its
	// claim deletes the mark.
	fresh := testRegistration(db, "older", time.Second, "default")
	fresh.id = "fresh"
	blocker, err = fresh.claim(ctx)
	require.NoError(t, err)
	require.Nil(t, blocker)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_worker_routes WHERE worker_id = 'mark'`).Scan(&marks))
	require.Zero(t, marks)
}
