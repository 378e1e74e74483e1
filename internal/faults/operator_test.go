package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/retention"
	"github.com/hookinbox/hookinbox/internal/testkit/bulkload"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// blockAccount makes every deposit to account fail with a retryable error
// (a trigger on the ledger's entries), as a downstream outage would, until
// unblock is called.
func blockAccount(t *testing.T, pool *pgxpool.Pool, account string) (unblock func()) {
	t.Helper()
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
CREATE TABLE operator_blocked (account_id text PRIMARY KEY);
CREATE FUNCTION operator_block() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM operator_blocked WHERE account_id = NEW.account_id) THEN
        RAISE EXCEPTION 'account % is blocked', NEW.account_id;
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER operator_block BEFORE INSERT ON ledger_entries FOR EACH ROW EXECUTE FUNCTION operator_block();`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO operator_blocked VALUES ($1)`, account)
	require.NoError(t, err)
	return func() {
		_, err := pool.Exec(ctx, `DELETE FROM operator_blocked`)
		require.NoError(t, err)
	}
}

// TestOperatorSteps is the operator-steps scenario (issue 24, points 4 to
// 6): a receiver, a ledger worker and inboxctl, the worker with its own
// config (worker.max_attempts 2, where the receiver's and inboxctl's say
// 25). It checks that a purged event whose job runs while its source is
// paused stays failed and is never enqueued again, over several reaper
// passes after the resume; that the worker's max_attempts is what River's
// job rows show and apply; that a bare `inboxctl replay` is refused without
// --yes and an empty match starts nothing; that a replay that succeeds
// leaves the row done without last_error, its history kept. The retention
// part runs the real pruner on the same database with a worker clock two
// days ahead (a Go binary's clock cannot be skewed from outside).
func TestOperatorSteps(t *testing.T) {
	t.Parallel()
	row := record(t, "12 operator steps (purge+pause, retention clock, replay, max_attempts)")
	ctx := context.Background()
	db := ledgerDB(t)
	unblock := blockAccount(t, db.Pool, "acc_blocked")
	config := setup{DB: db.URL}.write(t)
	workerConfig := withWorkerKeys(t, config, "max_attempts: 2", "reaper_interval: 100ms", "orphan_after: 500ms", "pause_refresh: 100ms")
	inboxctl := inboxctlBin(t)
	ctl := func(args ...string) (int, string) {
		t.Helper()
		return proctest.Run(t, command(inboxctl, append(args, "--config", config)...))
	}
	_, target := startReceiver(t, config)
	send := func(d faults.Deposit) {
		t.Helper()
		req, err := faults.Sign(ctx, target, secret, &d, time.Now())
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		row.Offered++
		row.Acked++
	}
	store := inboxstore.New(db.Pool)
	lookup := func(eventID string) *inboxstore.EventInfo {
		t.Helper()
		info, err := store.Lookup(ctx, "bank", eventID)
		require.NoError(t, err)
		return info
	}
	scalar := func(sql string, args ...any) int {
		t.Helper()
		var n int
		require.NoError(t, db.Pool.QueryRow(ctx, sql, args...).Scan(&n))
		return n
	}

	// Point 4: purge, then pause, then resume. The event's job is still to
	// run when it is purged, and runs while its source is paused.
	send(faults.Deposit{ID: "op_purged", Account: "acc_0", Cents: 100})
	code, out := ctl("sources", "pause", "bank")
	require.Zero(t, code, out)
	code, out = ctl("events", "purge", "op_purged", "--source", "bank", "--yes")
	require.Zero(t, code, out)
	require.Contains(t, out, "erased 1 event\n")
	purged := lookup("op_purged")
	worker, _ := startWorker(t, workerConfig)
	worker.WaitLine(t, "source paused", `"source":"bank"`)
	eventJobs := func(id int64) int {
		return scalar(`SELECT count(*) FROM river_job WHERE kind = $1 AND (args->>'inbox_id')::bigint = $2`, inboxstore.JobKind, id)
	}
	worker.WaitUntil(t, time.Minute, func() bool {
		return scalar(`SELECT count(*) FROM river_job WHERE kind = $1 AND (args->>'inbox_id')::bigint = $2 AND state = 'completed'`,
			inboxstore.JobKind, purged.ID) == 1
	})
	require.Equal(t, inbox.StatusFailed, lookup("op_purged").Status, "the job found the purged row and left it failed")
	code, out = ctl("sources", "resume", "bank")
	require.Zero(t, code, out)
	require.Contains(t, out, "0 held events enqueued")
	const passes = 5
	reaped := func() int {
		return scalar(`SELECT count(*) FROM river_job WHERE kind = 'hookinbox.reaper' AND state = 'completed'`)
	}
	before := reaped()
	worker.WaitUntil(t, time.Minute, func() bool { return reaped() >= before+passes })
	require.Equal(t, inbox.StatusFailed, lookup("op_purged").Status)
	require.Equal(t, 1, eventJobs(purged.ID), "the purged row was never enqueued again")

	// Point 6: the worker's max_attempts (2) decides, not the receiver's (25).
	send(faults.Deposit{ID: "op_blocked", Account: "acc_blocked", Cents: 250})
	worker.WaitUntil(t, time.Minute, func() bool { return lookup("op_blocked").Status == inbox.StatusFailed })
	blocked := lookup("op_blocked")
	require.Equal(t, 2, blocked.Attempts)
	require.Contains(t, blocked.LastError, "acc_blocked is blocked")
	var attempt, maxAttempts int
	var jobState string
	// The row is failed before River finalizes the job; wait for that.
	worker.WaitUntil(t, time.Minute, func() bool {
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT attempt, max_attempts, state::text FROM river_job WHERE id = $1`, *blocked.JobID).
			Scan(&attempt, &maxAttempts, &jobState))
		return jobState == "discarded" || jobState == "cancelled" || jobState == "completed"
	})
	require.Equal(t, []any{2, 2, "discarded"}, []any{attempt, maxAttempts, jobState}, "River's job row shows the worker's attempts")

	// A bare replay (every failed event of every source) is refused without
	// --yes; an empty match starts nothing.
	runs := func() int { return scalar(`SELECT count(*) FROM hookinbox_replay`) }
	code, out = ctl("replay")
	require.NotZero(t, code, out)
	require.Contains(t, out, "not confirmed; no replay started")
	require.Zero(t, runs(), "a bare replay started nothing")
	code, out = ctl("replay", "--source", "bank", "--type", "no.such.type")
	require.Zero(t, code, out)
	require.Contains(t, out, "no event matches; no replay started")
	require.Zero(t, runs(), "an empty match started nothing")

	// The outage ends; a replay succeeds and the row ends done without
	// last_error, its two failed attempts kept in its history.
	unblock()
	code, out = ctl("replay", "--source", "bank", "--error", "blocked")
	require.Zero(t, code, out)
	require.Contains(t, out, "started: 1 event at")
	// A ceiling, not a timing: the replayed job runs at River priority 4
	// and took over a minute on a 2-core machine at load 20 (two make test
	// runs at once).
	worker.WaitUntil(t, 3*time.Minute, func() bool { return lookup("op_blocked").Status == inbox.StatusDone })
	replayed := lookup("op_blocked")
	require.Empty(t, replayed.LastError)
	require.Len(t, replayed.AttemptErrors, 2)
	require.Equal(t, 1, runs())
	require.Equal(t, 1, scalar(`SELECT count(*) FROM ledger_entries WHERE event_id = 'op_blocked'`))

	// Issue 38: inboxctl under a config whose bank retention (1h) is inside
	// Standard Webhooks' redelivery window (96h), which the daemons refuse,
	// pruned the done op_blocked received 2 h ago, and the provider's
	// redelivery was then claimed as new, with a job that ran its handlers
	// again (the ledger's own key on the event absorbed the second deposit,
	// a handler without one would apply it twice). Every command that
	// writes the inbox refuses that config now.
	_, err := db.Pool.Exec(ctx, `UPDATE webhook_inbox SET received_at = received_at - interval '2 hours' WHERE source = 'bank' AND event_id = 'op_blocked'`)
	require.NoError(t, err)
	short := withBankKeys(t, config, "retention: 1h")
	for _, verb := range [][]string{{"prune"}, {"replay", "bank", "op_blocked"}} {
		code, out = proctest.Run(t, command(inboxctl, append(verb, "--config", short)...))
		require.NotZero(t, code, out)
		require.Contains(t, out, "sources[bank].retention: 1h0m0s is shorter than standardwebhooks's redelivery window (96h0m0s)")
	}
	send(faults.Deposit{ID: "op_blocked", Account: "acc_blocked", Cents: 250}) // the provider redelivers
	redelivered := lookup("op_blocked")
	if redelivered.ID != replayed.ID {
		row.Twice++ // claimed anew: its handlers run again
	}
	require.Equal(t, replayed.ID, redelivered.ID, "the redelivery is a duplicate of the row kept")
	require.Equal(t, replayed.JobID, redelivered.JobID, "no new job: the handlers do not run again")

	// Point 5: retention with the worker's clock two days ahead keeps the
	// rows inside retention by the database's clock.
	young, old := loadAged(t, db.Pool, store, "archive", 29*24*time.Hour, 20), loadAged(t, db.Pool, store, "archive", 31*24*time.Hour, 10)
	pruner := retention.NewPruner(store, &retention.Config{
		Policies: []retention.Policy{{Source: "archive", Retention: 30 * 24 * time.Hour}},
		Now:      func() time.Time { return time.Now().Add(48 * time.Hour) },
	})
	res, err := pruner.Run(ctx)
	require.NoError(t, err)
	require.EqualValues(t, old, res[0].Deleted)
	require.Equal(t, young, scalar(`SELECT count(*) FROM webhook_inbox WHERE source = 'archive'`), "young rows kept")

	row.Note = fmt.Sprintf("purged+paused row: failed, %d event job, 0 re-enqueued over %d reaper passes; "+
		"max_attempts 2 (receiver 25): job %d/%d %s; bare replay refused, empty match 0 runs; replay done, last_error cleared, %d attempts kept; "+
		"prune and replay refused under retention 1h (window 96h), redelivery a duplicate (no new row, no new job); "+
		"retention +48h worker clock: %d young kept, %d old pruned (real store)",
		eventJobs(purged.ID), passes, attempt, maxAttempts, jobState, len(replayed.AttemptErrors), young, res[0].Deleted)
}

// withWorkerKeys writes a copy of config with worker keys replaced or
// added, for a worker configured apart from the receiver and inboxctl.
func withWorkerKeys(t *testing.T, config string, keys ...string) string {
	t.Helper()
	b, err := os.ReadFile(config)
	require.NoError(t, err)
	s := strings.Replace(string(b), "  max_attempts: 25\n", "  "+strings.Join(keys, "\n  ")+"\n", 1)
	require.NotEqual(t, string(b), s)
	path := filepath.Join(t.TempDir(), "worker.yaml")
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	return path
}

// withBankKeys writes a copy of config with keys added to the bank
// source, for an inboxctl configured apart from the daemons.
func withBankKeys(t *testing.T, config string, keys ...string) string {
	t.Helper()
	b, err := os.ReadFile(config)
	require.NoError(t, err)
	bank := regexp.MustCompile(`(?m)^(  - \{name: bank, .*)\}$`)
	require.True(t, bank.Match(b))
	s := bank.ReplaceAllString(string(b), "${1}, "+strings.Join(keys, ", ")+"}")
	path := filepath.Join(t.TempDir(), "inboxctl.yaml")
	require.NoError(t, os.WriteFile(path, []byte(s), 0o600))
	return path
}

// loadAged loads n done rows of source received age ago by the database's
// clock, and returns n.
func loadAged(t *testing.T, pool *pgxpool.Pool, store *inboxstore.Store, source string, age time.Duration, n int) int {
	t.Helper()
	ctx := context.Background()
	now, err := store.Now(ctx)
	require.NoError(t, err)
	first, err := bulkload.ReserveIDs(ctx, pool, n)
	require.NoError(t, err)
	at := now.Add(-age)
	require.NoError(t, bulkload.Load(ctx, pool, n, func(i int) (*bulkload.Row, error) {
		return &bulkload.Row{
			ID: first + int64(i), Status: inbox.StatusDone, ReceivedAt: at, ProcessedAt: at,
			Delivery: &inboxstore.Delivery{
				Source: source, Provider: "standardwebhooks", Body: []byte(`{}`),
				Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("%s_%s_%d", source, age, i), Type: faults.DepositType, Payload: []byte(`{}`)}},
			},
		}, nil
	}))
	return n
}
