package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// These tests run the stock worker (cmd/worker) and this package's ledger
// binary side by side on one database, as an operator would, and check who
// settles which event: an event is only ever marked done by a worker that
// has a route for it.

const bankSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// exampleEnv is what config/hookinbox.yaml needs from the environment.
func exampleEnv(dbURL string) []string {
	return []string{
		"HOOKINBOX_DATABASE_URL=" + dbURL, "HOOKINBOX_WORKER_LISTEN=127.0.0.1:0",
		"STRIPE_WEBHOOK_SECRET=whsec_stripe", "SHOPIFY_WEBHOOK_SECRET=shopify", "BANK_WEBHOOK_SECRET=" + bankSecret,
		"SVIX_WEBHOOK_SECRET=" + bankSecret, "GITHUB_WEBHOOK_SECRET=github", "SQUARE_SIGNATURE_KEY=square",
		"PADDLE_WEBHOOK_SECRET=paddle", "SLACK_SIGNING_SECRET=slack", "MARQETA_WEBHOOK_PASSWORD=marqeta",
		"MARQETA_WEBHOOK_SECRET=marqeta", "ADYEN_HMAC_KEY=" + strings.Repeat("0", 64), "ADYEN_WEBHOOK_PASSWORD=adyen",
		"TWILIO_AUTH_TOKEN=twilio", "PARTNER_WEBHOOK_SECRET=partner", "PARTNER_API_KEY=partner",
		"BILLING_WEBHOOK_SECRET=" + bankSecret,
	}
}

// ledgerConcurrency is the concurrency of every worker these tests start.
const ledgerConcurrency = 4

// workerConfig writes a config with sources shop and bank on the given
// queues, and a worker section working queues with routes (YAML list items).
func workerConfig(t *testing.T, dbURL string, sourceQueues map[string]string, queues string, routes ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`
database: {url: %q}
log: {level: info, format: json}
sources:
  - {name: shop, provider: standardwebhooks, secrets: [%q], queue: %s}
  - {name: bank, provider: standardwebhooks, secrets: [%q], queue: %s}
worker:
  listen: "127.0.0.1:0"
  concurrency: %d
  job_timeout: 10m
  queues: [%s]
  routes:
    - %s
`, dbURL, bankSecret, sourceQueues["shop"], bankSecret, sourceQueues["bank"], ledgerConcurrency, queues, strings.Join(routes, "\n    - "))), 0o600))
	return path
}

// ingest claims n events of source, enqueued on the source's queue as the
// receiver does, and returns their event ids. bank's are deposits of 1.00.
func ingest(t *testing.T, pool *pgxpool.Pool, sourceQueues map[string]string, source string, n int) []string {
	t.Helper()
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{MaxAttempts: 10})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(pool, client, &inboxstore.IngesterConfig{QueueFor: func(s string) string { return sourceQueues[s] }})
	deliveries := make([]*inboxstore.Delivery, n)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s_%04d", source, i)
		eventType, payload := "order.created", `{"type":"order.created"}`
		if source == "bank" {
			eventType = "account.deposit"
			payload = fmt.Sprintf(`{"type":"account.deposit","data":{"account_id":"acc_%d","amount":"1.00"}}`, i%5)
		}
		deliveries[i] = &inboxstore.Delivery{Source: source, Provider: "standardwebhooks", Body: []byte(payload),
			Events: []inboxstore.IncomingEvent{{ID: ids[i], Type: eventType, Payload: []byte(payload)}}}
	}
	results, err := ingester.IngestGroup(context.Background(), deliveries)
	require.NoError(t, err)
	for _, res := range results {
		require.Equal(t, 1, res.New)
	}
	return ids
}

// logged returns the event ids the built-in log handler logged, by source.
func logged(t *testing.T, p *proctest.Process) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(p.Log()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg     string `json:"msg"`
			Source  string `json:"source"`
			EventID string `json:"event_id"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "event" {
			out[line.Source] = append(out[line.Source], line.EventID)
		}
	}
	require.NoError(t, sc.Err())
	for _, ids := range out {
		slices.Sort(ids)
	}
	return out
}

// ledgerEntries returns the event ids the ledger handler applied, by source.
func ledgerEntries(t *testing.T, pool *pgxpool.Pool) map[string][]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT source, event_id FROM ledger_entries ORDER BY event_id`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var source, id string
		require.NoError(t, rows.Scan(&source, &id))
		out[source] = append(out[source], id)
	}
	require.NoError(t, rows.Err())
	return out
}

func counts(t *testing.T, pool *pgxpool.Pool) *inboxstore.Counts {
	t.Helper()
	c, err := inboxstore.New(pool).Count(context.Background(), &inboxstore.Filter{})
	require.NoError(t, err)
	return c
}

// untouched requires that no worker took any job: every row pending, no
// job ever attempted.
func untouched(t *testing.T, db *dbtest.DB, n int) {
	t.Helper()
	require.Equal(t, &inboxstore.Counts{Pending: int64(n)}, counts(t, db.Pool))
	require.Zero(t, attempted(t, db.Pool, ""), "a job was taken")
}

// attempted counts the jobs of kind (of every kind when kind is "") a
// worker ever took.
func attempted(t *testing.T, pool *pgxpool.Pool, kind string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE attempted_at IS NOT NULL AND ($1 = '' OR kind = $1)`, kind).Scan(&n))
	return n
}

func records(t *testing.T, pool *pgxpool.Pool, queue string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM hookinbox_worker_routes WHERE queue = $1`, queue).Scan(&n))
	return n
}

// TestTwoWorkerBinariesOnTwoQueues runs cmd/worker on queue qa, where source
// shop's events go, routed to the log handler, and the ledger on queue qb,
// where bank's go: each settles exactly its own source's events. The
// evidence is what each handler leaves behind: the log handler's line in
// cmd/worker's own output, and the ledger's ledger_entries rows.
func TestTwoWorkerBinariesOnTwoQueues(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs subprocesses")
	}
	ledgerBin, workerBin := buildBinaries(t)
	db := ledgerDB(t)

	const n = 200
	queues := map[string]string{"shop": "qa", "bank": "qb"}
	shopIDs := ingest(t, db.Pool, queues, "shop", n)
	bankIDs := ingest(t, db.Pool, queues, "bank", n)

	stock := proctest.Start(t, ledgerCommand(workerBin, nil, "--config", workerConfig(t, db.URL, queues, "qa", `{source: shop, handlers: [log]}`)))
	ledger := proctest.Start(t, ledgerCommand(ledgerBin, nil, "--config", workerConfig(t, db.URL, queues, "qb",
		`{source: bank, types: ["account.deposit"], handlers: [ledger]}`)))
	stock.WaitUntil(t, 90*time.Second, func() bool {
		ledger.RequireRunning(t)
		return counts(t, db.Pool).Done == 2*n
	})
	stock.Stop(t)
	ledger.Stop(t)

	require.Equal(t, &inboxstore.Counts{Done: 2 * n}, counts(t, db.Pool))
	var noted int
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_inbox WHERE note IS NOT NULL OR last_error IS NOT NULL`).Scan(&noted))
	require.Zero(t, noted, "an event was settled without a route, or failed")

	stockLogged, ledgerLogged := logged(t, stock), logged(t, ledger)
	entries := ledgerEntries(t, db.Pool)
	t.Logf("shop (queue qa): %d events, %d logged by cmd/worker, %d by the ledger, %d ledger entries",
		n, len(stockLogged["shop"]), len(ledgerLogged["shop"]), len(entries["shop"]))
	t.Logf("bank (queue qb): %d events, %d ledger entries, %d logged by cmd/worker, %d by the ledger",
		n, len(entries["bank"]), len(stockLogged["bank"]), len(ledgerLogged["bank"]))
	require.Equal(t, map[string][]string{"shop": shopIDs}, stockLogged, "cmd/worker ran log for exactly shop's events")
	require.Empty(t, ledgerLogged)
	require.Equal(t, map[string][]string{"bank": bankIDs}, entries, "the ledger applied exactly bank's events")
}

// TestWorkerWithoutARouteForASourceOnItsQueueRefusesToStart: cmd/worker
// works queue qa, where both shop's and bank's events go, with a route for
// shop only. It exits non-zero naming bank, having taken nothing.
func TestWorkerWithoutARouteForASourceOnItsQueueRefusesToStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs subprocesses")
	}
	_, workerBin := buildBinaries(t)
	db := ledgerDB(t)

	const n = 50
	queues := map[string]string{"shop": "qa", "bank": "qa"}
	ingest(t, db.Pool, queues, "shop", n)
	ingest(t, db.Pool, queues, "bank", n)

	code, out := proctest.Run(t, ledgerCommand(workerBin, nil, "--config", workerConfig(t, db.URL, queues, "qa", `{source: shop, handlers: [log]}`)))
	require.Equal(t, 1, code, out)
	require.Contains(t, out, `worker.routes: no route for source "bank", whose events go to queue "qa" (worker.queues); add a route or stop working that queue`)
	untouched(t, db, 2*n)
	require.Zero(t, records(t, db.Pool, "qa"))
	t.Logf("refused with exit code %d; %d of %d events still pending, no job taken", code, counts(t, db.Pool).Pending, 2*n)
}

// TestExampleConfigWorkerBesideTheLedgerWaitsForItToHandOver is the
// reported case: the ledger works queue bank with its own route for bank,
// and the stock worker starts with config/hookinbox.yaml, which works
// [default, bank] with a catch-all route to noop. Its routes cover every
// source, so only the routes record stops it from settling bank's deposits
// with noop while the ledger works them: it waits, taking nothing, while the
// ledger finishes the deposits it holds; then the ledger, seeing a newer
// route set, takes no more and hands over (this is how a route change rolls
// out), and the stock worker settles the rest with its own route, noop.
func TestExampleConfigWorkerBesideTheLedgerWaitsForItToHandOver(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs subprocesses")
	}
	ledgerBin, workerBin := buildBinaries(t)
	db := ledgerDB(t)
	ctx := context.Background()

	queues := map[string]string{"shop": "default", "bank": "bank"}
	ledger := proctest.Start(t, ledgerCommand(ledgerBin, nil, "--config", workerConfig(t, db.URL, queues, "bank",
		`{source: bank, types: ["account.deposit"], handlers: [ledger]}`)))
	ledger.WaitUntil(t, 60*time.Second, func() bool { return records(t, db.Pool, "bank") == 1 })
	// Hold every account the deposits credit, so that the ledger's handlers
	// block inside their transactions: the ledger stays alive (its routes
	// record stays live, renewed by its heartbeat) but settles nothing, and
	// the deposits it has not taken wait for whoever takes them.
	const n = 100
	_, err := db.Pool.Exec(ctx, `INSERT INTO ledger_accounts (account_id) SELECT 'acc_' || g FROM generate_series(0, 4) AS g`)
	require.NoError(t, err)
	lock, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(ctx) // Released explicitly below; this is for a failed test.
	_, err = lock.Exec(ctx, `SELECT 1 FROM ledger_accounts FOR UPDATE`)
	require.NoError(t, err)
	ingest(t, db.Pool, queues, "bank", n)
	ledger.WaitUntil(t, 60*time.Second, func() bool { return len(dbtest.BlockedJobs(t, db.Pool, inboxstore.JobKind)) == ledgerConcurrency })

	stock := proctest.Start(t, ledgerCommand(workerBin, exampleEnv(db.URL), "--config", "../../config/hookinbox.yaml"))
	line := stock.WaitLine(t, "waiting: a live worker works a queue of this worker with other routes")
	require.Contains(t, line, `"their_routes":"bank account.deposit -> ledger; unrouted -> failed"`)
	require.Contains(t, line, `"routes":"* * -> noop;`)
	ledger.WaitLine(t, "a newer route set waits on a queue of this worker")
	// Nothing settled, and the only jobs ever taken are the ledger's, still
	// blocked on the lock.
	require.Equal(t, &inboxstore.Counts{Pending: n}, counts(t, db.Pool))
	// The ledger's own periodic jobs (reaper, prune) run on queue bank too,
	// before the deposits when its leadership came before their insert.
	require.Equal(t, ledgerConcurrency, attempted(t, db.Pool, inboxstore.JobKind), "the stock worker took a job")
	t.Logf("cmd/worker with the example config waits; %d of %d deposits still pending, none taken by it", counts(t, db.Pool).Pending, n)

	require.NoError(t, lock.Rollback(ctx))
	ledger.WaitLine(t, "idle: a newer route set took over")
	stock.WaitUntil(t, 60*time.Second, func() bool { return counts(t, db.Pool).Done == n })
	require.Len(t, ledgerEntries(t, db.Pool)["bank"], ledgerConcurrency, "the ledger applied exactly the deposits it held")
	require.Equal(t, 1, records(t, db.Pool, "bank"), "only the stock worker's record is left")
	t.Logf("the ledger applied the %d deposits it held and handed over; cmd/worker settled the other %d with noop",
		ledgerConcurrency, n-ledgerConcurrency)

	stock.Stop(t)
	ledger.Stop(t)
	var left int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_worker_routes`).Scan(&left))
	require.Zero(t, left, "a stopped worker deletes its records")
}
