package faults_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// full is set by `make faults`: the scenarios run at their full sizes.
var full = os.Getenv("HOOKINBOX_FAULTS") == "full"

// size returns fast in `make test` and slow in `make faults`.
func size[T any](fast, slow T) T {
	if full {
		return slow
	}
	return fast
}

// secret is the bank source's Standard Webhooks signing secret.
const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// binaries are the commands the scenarios run, built together (one go
// build links them in parallel) once per test process; slowworker is
// scenario 9's.
var binaries = []string{"../../cmd/receiver", "../../examples/ledger", "../../cmd/inboxctl", "../../internal/testkit/slowworker"}

// receiverBin, ledgerBin and inboxctlBin are cmd/receiver, examples/ledger
// (the ledger worker) and cmd/inboxctl.
func receiverBin(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, binaries...)[0]
}

func ledgerBin(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, binaries...)[1]
}

func inboxctlBin(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, binaries...)[2]
}

// command runs bin with an environment that names no config and no
// database: only the test's config does.
func command(bin string, args ...string) *exec.Cmd {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=", "HOOKINBOX_DATABASE_URL=")
	return cmd
}

// setup describes the config of a scenario's daemons.
type setup struct {
	DB       string        // database URL
	Listen   string        // receiver.listen; default 127.0.0.1:0
	MaxConns int           // database.max_conns; default 10 (the worker needs one per slot)
	Flushers int           // receiver.batch_flushers; default 2
	Job      time.Duration // worker.job_timeout (rescue_after is a second more); default 5 min; negative: the product's defaults for both
	Extra    string        // appended YAML (more top-level keys)
	Sources  string        // more entries of sources:
	Routes   string        // more entries of worker.routes:
	Receiver string        // more receiver keys, in flow style ("ack_timeout: 60s")
	Queue    string        // the bank source's queue, the one queue the worker works; default River's default
	Worker   string        // one more worker key ("reaper_interval: 2s")
	Database string        // more database keys, in flow style ("durability: {require: server_loss}")
	Handlers string        // the bank route's handlers; default "ledger"
	Route    string        // more keys of the bank route, in flow style (", destinations: [feed]")
}

// timeoutKeys is a worker config's job_timeout, and its rescue_after a
// second more.
func timeoutKeys(job time.Duration) string {
	return fmt.Sprintf("job_timeout: %s\n  rescue_after: %s", job, job+time.Second)
}

// write writes the config and returns its path.
func (s setup) write(t *testing.T) string {
	t.Helper()
	listen := s.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	maxConns, flushers, job := s.MaxConns, s.Flushers, s.Job
	if maxConns == 0 {
		maxConns = workerConcurrency + 2
	}
	if flushers == 0 {
		flushers = 2
	}
	if job == 0 {
		job = 5 * time.Minute
	}
	timeouts := timeoutKeys(job)
	if job < 0 {
		timeouts = ""
	}
	if s.Handlers == "" {
		s.Handlers = "ledger"
	}
	if s.Receiver == "" {
		s.Receiver = "ack_timeout: 4s"
	}
	if s.Database != "" {
		s.Database = ", " + s.Database
	}
	source, workerKeys := "", s.Worker
	if s.Queue != "" {
		source, workerKeys = fmt.Sprintf(", queue: %q", s.Queue), fmt.Sprintf("queues: [%q]\n  %s", s.Queue, s.Worker)
	}
	path := filepath.Join(t.TempDir(), "faults.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `
database: {url: %q, max_conns: %d%s}
log: {level: info}
receiver: {listen: %q, batch_flushers: %d, %s}
sources:
  - {name: bank, provider: standardwebhooks, secrets: [%q]%s}
%s
worker:
  listen: "127.0.0.1:0"
  concurrency: 8
  max_attempts: 25
  %s
  soft_stop_timeout: 5s
  %s
  routes:
    - {source: bank, types: [%q], handlers: [%s]%s}
%s
%s`, s.DB, maxConns, s.Database, listen, flushers, s.Receiver, secret, source, s.Sources, timeouts, workerKeys,
		faults.DepositType, s.Handlers, s.Route, s.Routes, s.Extra), 0o600))
	return path
}

// ledgerSets are the migration sets of the ledger example: the core's and
// the ledger's own (River's come with them).
func ledgerSets() []*schema.Set {
	return []*schema.Set{schema.Core(), {Name: "ledger", FS: os.DirFS("../../examples/ledger/migrations")}}
}

// ledgerDB returns a database of the test's own on the shared server,
// copied from a template migrated once for the ledger example.
func ledgerDB(t *testing.T) *dbtest.DB {
	t.Helper()
	return dbtest.New(t, ledgerSets()...)
}

// migrate applies the ledger example's migrations to the database at dbURL
// (a private cluster's).
func migrate(t *testing.T, dbURL string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	defer pool.Close()
	_, err = schema.Migrate(ctx, pool, nil, ledgerSets()...)
	require.NoError(t, err)
}

// startReceiver starts a receiver and waits until it accepts webhooks; it
// returns the process and its webhook URL for the bank source.
func startReceiver(t *testing.T, config string) (*proctest.Process, string) {
	t.Helper()
	p := proctest.Start(t, command(receiverBin(t), "--config", config))
	addr := listenAddr(t, p, "receiver")
	p.WaitLine(t, "receiver accepting webhooks")
	return p, "http://" + addr + "/webhooks/bank"
}

// startWorker starts a ledger worker and returns it with its listen
// address (health and metrics).
func startWorker(t *testing.T, config string) (*proctest.Process, string) {
	t.Helper()
	p := proctest.Start(t, command(ledgerBin(t), "--config", config))
	return p, listenAddr(t, p, "worker")
}

// listenAddr is the address a daemon (what: receiver or worker) logged it
// listens on.
func listenAddr(t *testing.T, p *proctest.Process, what string) string {
	t.Helper()
	m := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(p.WaitLine(t, what+" listening"))
	require.NotNil(t, m)
	return m[1]
}

// freePort returns a loopback port nothing listens on now, for a receiver
// that must come back on the same address after a restart.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// getPage returns the status and body of a GET of url (a daemon's
// /metrics or /readyz).
func getPage(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test's scrape
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

// outcome is what the database holds at the end of a scenario.
type outcome struct {
	rows, distinct, done, failed int // the bank source's inbox rows
	jobsTwice                    int // inbox rows with more than one event job
	entries, entryIDs            int // ledger entries, and their distinct event ids
	missing                      []string
	badBalances                  []string
}

// lost and twice are the table's figures for o.
func (o *outcome) lost() int  { return len(o.missing) }
func (o *outcome) twice() int { return o.entries - o.entryIDs + len(o.badBalances) }

// check is checkEffects, and requires every row to have had one event job:
// no reaper healed any.
func check(t *testing.T, pool *pgxpool.Pool, ds []faults.Deposit, acked []faults.Ack) *outcome {
	t.Helper()
	o := checkEffects(t, pool, ds, acked)
	require.Zero(t, o.jobsTwice, "inbox rows with two event jobs")
	return o
}

// checkEffects reads what the database holds for ds, acked being the ids
// answered 2xx, and requires the guarantee: every acknowledged event
// stored once, done, applied once, and the balances the sum of the
// distinct deposits. A row may have had more than one job (a reaper
// healed it): the ledger entries and the balances measure what counts, the
// effects.
func checkEffects(t *testing.T, pool *pgxpool.Pool, ds []faults.Deposit, acked []faults.Ack) *outcome {
	t.Helper()
	ctx := context.Background()
	o := &outcome{}
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id),
  count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed')
FROM webhook_inbox WHERE source = 'bank'`).Scan(&o.rows, &o.distinct, &o.done, &o.failed))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM river_job WHERE kind = $1
GROUP BY args->>'inbox_id' HAVING count(*) > 1) AS twice`, inboxstore.JobKind).Scan(&o.jobsTwice))
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id) FROM ledger_entries`).Scan(&o.entries, &o.entryIDs))
	rows, err := pool.Query(ctx, `SELECT event_id FROM webhook_inbox WHERE source = 'bank'`)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	stored := map[string]bool{}
	for _, id := range ids {
		stored[id] = true
	}
	for _, a := range acked {
		if !stored[a.ID] {
			o.missing = append(o.missing, a.ID)
		}
	}
	for account, want := range faults.Balances(ds) {
		var got string
		err := pool.QueryRow(ctx, `SELECT balance::text FROM ledger_accounts WHERE account_id = $1`, account).Scan(&got)
		if err != nil || got != want {
			o.badBalances = append(o.badBalances, fmt.Sprintf("%s: %s, want %s (%v)", account, got, want, err))
		}
	}
	require.Empty(t, o.missing, "acknowledged events missing from the inbox")
	require.Equal(t, len(ds), o.rows, "inbox rows")
	require.Equal(t, o.rows, o.distinct, "an event stored twice")
	require.Equal(t, o.rows, o.done, "events done (%d failed)", o.failed)
	require.Equal(t, len(ds), o.entries, "ledger entries")
	require.Equal(t, o.entries, o.entryIDs, "an event applied twice")
	require.Empty(t, o.badBalances, "balances")
	return o
}

// countDone returns the bank source's done events.
func countDone(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM webhook_inbox WHERE source = 'bank' AND status = 'done'`).Scan(&n))
	return n
}

// waitDone waits until want events are done, failing when p exits or
// after timeout; it returns the longest time the done count stood still.
func waitDone(t *testing.T, p *proctest.Process, pool *pgxpool.Pool, want int, timeout time.Duration) time.Duration {
	t.Helper()
	var stall time.Duration
	last, since := -1, time.Now()
	p.WaitUntil(t, timeout, func() bool {
		n := countDone(t, pool)
		if n != last {
			stall = max(stall, time.Since(since))
			last, since = n, time.Now()
		}
		return n >= want
	})
	return stall
}

// noSecrets fails the test when any of secrets appears in texts (logs,
// metric pages, error bodies), naming where.
func noSecrets(t *testing.T, secrets []string, texts map[string]string) (scanned int) {
	t.Helper()
	for where, text := range texts {
		scanned += strings.Count(text, "\n") + 1
		for _, s := range secrets {
			require.NotContains(t, text, s, "a secret in %s", where)
		}
	}
	return scanned
}
