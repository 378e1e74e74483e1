package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// ledgerCommand returns a command running bin (the ledger or cmd/worker)
// with args, and with an environment that names no config and no database
// beyond env: only the test's config does.
func ledgerCommand(bin string, env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG="), env...)
	return cmd
}

// buildBinaries returns the ledger's binary and cmd/worker's, built
// together (one go build links them in parallel) once per test process.
func buildBinaries(t *testing.T) (ledger, worker string) {
	t.Helper()
	bins := proctest.Build(t, ".", "../../cmd/worker")
	return bins[0], bins[1]
}

// writeConfig writes a ledger config for the test's database, reached
// directly. jobTimeout bounds one handler run; River rescues a job left
// running for a second longer than that.
func writeConfig(t *testing.T, dbURL string, jobTimeout time.Duration) string {
	t.Helper()
	return writePoolerConfig(t, dbURL, config.PoolerNone, jobTimeout)
}

// writePoolerConfig is writeConfig with database.pooler set to pooler.
func writePoolerConfig(t *testing.T, dbURL, pooler string, jobTimeout time.Duration) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`
database: {url: %q, pooler: %s}
log: {level: info}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
worker:
  listen: "127.0.0.1:0"
  concurrency: %d
  group_max_events: 1
  max_attempts: 10
  job_timeout: %s
  rescue_after: %s
  soft_stop_timeout: 5s
  routes:
    - {source: bank, types: ["account.deposit"], handlers: [ledger]}
`, dbURL, pooler, crashConcurrency, jobTimeout, jobTimeout+time.Second)), 0o600))
	return path
}

func countDone(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	c, err := inboxstore.New(pool).Count(context.Background(), &inboxstore.Filter{Source: "bank"})
	require.NoError(t, err)
	return c.Done
}

// runningJobs returns the inbox ids of the event jobs River has running.
func runningJobs(t *testing.T, pool *pgxpool.Pool) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT (args->>'inbox_id')::bigint FROM river_job WHERE kind = $1 AND state = 'running' ORDER BY 1`, inboxstore.JobKind)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}

// crashConcurrency is the worker's concurrency in the crash test: the number
// of events in flight when it is killed.
const crashConcurrency = 8

// TestSIGKILLMidBatch kills a ledger worker process with SIGKILL while it
// works through a batch of deposits, restarts it, and checks that every
// deposit was applied exactly once.
//
// The kill must interrupt events in the middle of their transaction, and that
// holds by construction, not by timing: the test holds a row lock on one
// account, so every deposit to it blocks inside its handler, after its inbox
// row was marked done in the same, uncommitted transaction, and so do the
// other events of its group (they share the transaction). Those jobs cannot
// finish while the lock is held, so once every worker slot holds a job whose
// row is taken by a transaction waiting on a lock, the state cannot change
// until the kill. Jobs whose group committed just before may still be
// running in River (its batched completer had not flushed): their rows are
// done, and the restart must find them so and apply nothing twice. The first process has a long job
// timeout, so that nothing cancels the blocked handlers; the second has a
// short rescue_after, so that River's rescuer (once the dead leader's lease of
// about 15 s expires) takes back the jobs the kill left running.
func TestSIGKILLMidBatch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills a subprocess")
	}
	testSIGKILLMidBatch(t, func(db *dbtest.DB) string { return db.URL }, config.PoolerNone)
}

// TestSIGKILLMidBatchThroughPgBouncer is TestSIGKILLMidBatch with the worker
// reaching PostgreSQL through PgBouncer in transaction pooling mode
// (database.pooler: transaction, so exec query mode and River polling). The
// killed process's transactions, each on a server connection PgBouncer had
// lent it, must roll back as they do on a direct connection.
func TestSIGKILLMidBatchThroughPgBouncer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills a subprocess")
	}
	bouncer := dbtest.StartPgBouncer(t)
	testSIGKILLMidBatch(t, func(db *dbtest.DB) string { return bouncer.URL(t, db) }, config.PoolerTransaction)
}

// testSIGKILLMidBatch runs the scenario with the ledger worker reaching the
// test's database at workerURL(db), behind pooler (database.pooler); the
// test itself reads and locks the database directly.
func testSIGKILLMidBatch(t *testing.T, workerURL func(*dbtest.DB) string, pooler string) {
	t.Helper()
	bin, _ := buildBinaries(t)
	db := ledgerDB(t)
	ctx := context.Background()

	const n, accounts = 3000, 7
	deliveries := make([]*inboxstore.Delivery, n)
	want := map[string]int64{} // cents per account
	for i := range n {
		account := fmt.Sprintf("acc_%d", i%accounts)
		cents := int64(100 + i)
		want[account] += cents
		payload := fmt.Sprintf(`{"type":"account.deposit","data":{"account_id":%q,"amount":"%d.%02d"}}`, account, cents/100, cents%100)
		deliveries[i] = &inboxstore.Delivery{Source: "bank", Provider: "standardwebhooks", Body: []byte(payload),
			Events: []inboxstore.IncomingEvent{{ID: fmt.Sprintf("msg_%05d", i), Type: "account.deposit", Payload: []byte(payload)}}}
	}
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 10})
	require.NoError(t, err)
	// One transaction for all of them, as the receiver's group commit makes.
	results, err := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}).IngestGroup(ctx, deliveries)
	require.NoError(t, err)
	claimed := 0
	for _, res := range results {
		claimed += res.New
	}
	require.Equal(t, n, claimed)

	// Hold acc_0 (every 7th deposit) locked for the first process's life.
	_, err = db.Pool.Exec(ctx, `INSERT INTO ledger_accounts (account_id)
SELECT 'acc_' || g FROM generate_series(0, $1 - 1) AS g`, accounts)
	require.NoError(t, err)
	lock, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(ctx) // Released explicitly below; this is for a failed test.
	_, err = lock.Exec(ctx, `SELECT 1 FROM ledger_accounts WHERE account_id = 'acc_0' FOR UPDATE`)
	require.NoError(t, err)

	first := proctest.Start(t, ledgerCommand(bin, nil, "--config", writePoolerConfig(t, workerURL(db), pooler, 5*time.Minute)))
	var inFlight []int64
	first.WaitUntil(t, 90*time.Second, func() bool {
		inFlight = dbtest.BlockedJobs(t, db.Pool, inboxstore.JobKind)
		return len(inFlight) == crashConcurrency
	})
	first.Kill(t)

	// What the kill interrupted: every slot held a deposit whose done mark
	// (and, for acc_0's, ledger entry) was written but not committed.
	running := runningJobs(t, db.Pool)
	require.Subset(t, running, inFlight, "River still records the killed jobs as running")
	require.NoError(t, lock.Rollback(ctx))
	for _, id := range running {
		if !slices.Contains(inFlight, id) {
			var status string
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM webhook_inbox WHERE id = $1`, id).Scan(&status))
			require.Equal(t, "done", status, "inbox row %d: committed, its job's completion lost with the process", id)
		}
	}
	doneAtKill := countDone(t, db.Pool)
	require.Less(t, doneAtKill, int64(n-n/accounts), "acc_0's deposits cannot have been applied")
	for _, id := range inFlight {
		var status string
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT status FROM webhook_inbox WHERE id = $1`, id).Scan(&status))
		require.Equal(t, "pending", status, "inbox row %d: its done mark died with the process", id)
	}
	t.Logf("killed with %d of %d done, %d events mid-transaction and %d committed but not completed", doneAtKill, n, len(inFlight), len(running)-len(inFlight))
	restart := time.Now()

	second := proctest.Start(t, ledgerCommand(bin, nil, "--config", writePoolerConfig(t, workerURL(db), pooler, 2*time.Second)))
	second.WaitUntil(t, 180*time.Second, func() bool { return countDone(t, db.Pool) == n })
	t.Logf("all done %s after the restart", time.Since(restart).Round(time.Second))
	var entries, distinct int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id) FROM ledger_entries`).Scan(&entries, &distinct))
	require.Equal(t, n, entries)
	require.Equal(t, n, distinct)
	for account, cents := range want {
		require.Equal(t, fmt.Sprintf("%d.%02d", cents/100, cents%100), balance(t, db, account), account)
	}

	// SIGTERM stops the worker gracefully: exit status 0.
	second.Stop(t)
}
