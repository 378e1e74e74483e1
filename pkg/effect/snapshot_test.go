package effect_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/effect"
)

func upsert(t *testing.T, db *dbtest.DB, s *effect.Snapshot, tie effect.Tie) effect.Outcome {
	t.Helper()
	var out effect.Outcome
	require.NoError(t, pgx.BeginFunc(context.Background(), db.Pool, func(tx pgx.Tx) error {
		var err error
		out, err = effect.Upsert(context.Background(), tx, s, tie)
		return err
	}))
	return out
}

func stored(t *testing.T, db *dbtest.DB) (version, inboxID int64) {
	t.Helper()
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT version, inbox_id FROM hookinbox_snapshot WHERE source = 's' AND kind = 'customer' AND object_id = 'cus_1'`).Scan(&version, &inboxID))
	return version, inboxID
}

var base = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

func snap(version, inboxID int64, eventTime time.Time) *effect.Snapshot {
	return &effect.Snapshot{Source: "s", Kind: "customer", ObjectID: "cus_1", Version: version, EventTime: eventTime,
		ReceivedAt: base.Add(time.Duration(inboxID) * time.Millisecond), InboxID: inboxID, EventID: fmt.Sprint("evt_", inboxID),
		Payload: json.RawMessage(fmt.Sprintf(`{"v":%d}`, version))}
}

func TestUpsert(t *testing.T) {
	t.Parallel()

	t.Run("InsertedUpdatedStale", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		require.Equal(t, effect.Inserted, upsert(t, db, snap(2, 1, base), ""))
		require.Equal(t, effect.Updated, upsert(t, db, snap(3, 2, base), ""))
		require.Equal(t, effect.Stale, upsert(t, db, snap(1, 3, base), ""))
		v, id := stored(t, db)
		require.Equal(t, []int64{3, 2}, []int64{v, id})
	})

	t.Run("IdenticalReplayIsANoOp", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		for _, tie := range []effect.Tie{effect.TieArrival, effect.TieKeepFirst} {
			_, err := db.Pool.Exec(context.Background(), `DELETE FROM hookinbox_snapshot`)
			require.NoError(t, err)
			require.Equal(t, effect.Inserted, upsert(t, db, snap(5, 7, base), tie))
			var before time.Time
			require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT updated_at FROM hookinbox_snapshot`).Scan(&before))
			require.Equal(t, effect.Stale, upsert(t, db, snap(5, 7, base), tie), tie)
			var after time.Time
			require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT updated_at FROM hookinbox_snapshot`).Scan(&after))
			require.Equal(t, before, after, "nothing was written")
		}
	})

	// TieArrival: a tied version is broken by the event time, then by the
	// inbox's received_at and id; the later wins, whatever the processing
	// order.
	t.Run("TieArrivalLaterWins", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		require.Equal(t, effect.Inserted, upsert(t, db, snap(10, 2, base), effect.TieArrival))
		require.Equal(t, effect.Updated, upsert(t, db, snap(10, 3, base), effect.TieArrival), "same second, later delivery")
		require.Equal(t, effect.Stale, upsert(t, db, snap(10, 1, base), effect.TieArrival), "same second, earlier delivery")
		require.Equal(t, effect.Stale, upsert(t, db, snap(10, 9, base.Add(-time.Second)), effect.TieArrival),
			"an earlier event time loses even when delivered later")
		_, id := stored(t, db)
		require.EqualValues(t, 3, id)
	})

	t.Run("TieKeepFirst", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		require.Equal(t, effect.Inserted, upsert(t, db, snap(10, 2, base), effect.TieKeepFirst))
		require.Equal(t, effect.Stale, upsert(t, db, snap(10, 3, base.Add(time.Second)), effect.TieKeepFirst))
		_, id := stored(t, db)
		require.EqualValues(t, 2, id)
	})

	t.Run("UnknownTieIsRefused", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		err := pgx.BeginFunc(context.Background(), db.Pool, func(tx pgx.Tx) error {
			_, err := effect.Upsert(context.Background(), tx, snap(1, 1, base), "newest")
			return err
		})
		require.ErrorContains(t, err, `unknown tie rule "newest"`)
	})

	// Random permutations of a history with distinct and tied versions:
	// the stored snapshot is always the greatest by the tie rule.
	t.Run("PermutationsEndAtTheGreatest", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		history := []*effect.Snapshot{snap(1, 1, base), snap(2, 2, base), snap(2, 3, base), snap(3, 4, base.Add(time.Second)),
			snap(3, 5, base), snap(3, 6, base)}
		for range 30 {
			_, err := db.Pool.Exec(context.Background(), `DELETE FROM hookinbox_snapshot`)
			require.NoError(t, err)
			for _, i := range rand.Perm(len(history)) {
				upsert(t, db, history[i], effect.TieArrival)
			}
			v, id := stored(t, db)
			require.Equal(t, []int64{3, 4}, []int64{v, id}, "version 3 with the latest event time")
		}
	})
}

// TestUpsertPostgres18 runs the RETURNING old/new branch. Only PostgreSQL 15
// is installed where hookinbox is developed: it skips unless
// HOOKINBOX_PG18_URL names a reachable PostgreSQL 18 or later.
func TestUpsertPostgres18(t *testing.T) {
	t.Parallel()
	url := os.Getenv("HOOKINBOX_PG18_URL")
	if url == "" {
		t.Skip("HOOKINBOX_PG18_URL is unset: no PostgreSQL 18 is reachable")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Skipf("no PostgreSQL 18 reachable at HOOKINBOX_PG18_URL: %v", err)
	}
	defer conn.Close(ctx)
	var num int
	require.NoError(t, conn.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&num))
	if num < 180000 {
		t.Skipf("HOOKINBOX_PG18_URL is PostgreSQL %d, not 18 or later", num)
	}
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	// A temporary table shadows any hookinbox_snapshot, and goes with the
	// rollback.
	_, err = tx.Exec(ctx, `CREATE TEMP TABLE hookinbox_snapshot (
    source text NOT NULL, kind text NOT NULL, object_id text NOT NULL, version bigint NOT NULL,
    event_time timestamptz NOT NULL, received_at timestamptz NOT NULL, inbox_id bigint NOT NULL,
    event_id text NOT NULL, payload jsonb NOT NULL, updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, kind, object_id))`)
	require.NoError(t, err)
	for _, c := range []struct {
		s    *effect.Snapshot
		want effect.Outcome
	}{{snap(1, 1, base), effect.Inserted}, {snap(2, 2, base), effect.Updated}, {snap(1, 3, base), effect.Stale}} {
		out, err := effect.Upsert(ctx, tx, c.s, "")
		require.NoError(t, err)
		require.Equal(t, c.want, out)
	}
}
