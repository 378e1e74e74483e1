package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// buildLedger compiles this package's binary once per test run.
var buildLedger = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "ledger-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ledger")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return bin, nil
})

// syncBuffer collects a subprocess's log for the test's failure output.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func writeConfig(t *testing.T, dbURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ledger.yaml")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`
database: {url: %q}
log: {level: info}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
worker:
  listen: "127.0.0.1:0"
  concurrency: 8
  max_attempts: 10
  job_timeout: 2s
  rescue_after: 3s
  soft_stop_timeout: 5s
  routes:
    - {source: bank, types: ["account.deposit"], handlers: [ledger]}
`, dbURL)), 0o600))
	return path
}

// process is a running ledger binary.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // valid once exited is closed
}

func startLedger(t *testing.T, bin, config string, logs *syncBuffer) *process {
	t.Helper()
	cmd := exec.Command(bin, "--config", config)
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "DATABASE_URL=")
	require.NoError(t, cmd.Start())
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitUntil polls cond until it holds, failing at once if the process
// exits first.
func (p *process) waitUntil(t *testing.T, timeout time.Duration, logs *syncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		select {
		case <-p.exited:
			t.Fatalf("ledger exited early (%v); logs:\n%s", p.err, logs)
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s; logs:\n%s", timeout, logs)
		}
	}
}

func countDone(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	c, err := inbox.InboxCount(context.Background(), pool, "bank")
	require.NoError(t, err)
	return c.Done
}

func countRunning(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM river_job WHERE kind = $1 AND state = 'running'`, inbox.JobKind).Scan(&n))
	return n
}

// TestSIGKILLMidBatch kills a ledger worker process with SIGKILL while it
// works through a batch of deposits, restarts it, and checks that every
// deposit was applied exactly once. The restart waits out River's own
// timing: the dead leader's lease (about 15 s) and then the rescuer, which
// takes back jobs left running for longer than rescue_after.
func TestSIGKILLMidBatch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills a subprocess")
	}
	bin, err := buildLedger()
	require.NoError(t, err)
	db := ledgerDB(t)
	ctx := context.Background()

	const n, accounts = 3000, 7
	events := make([]inbox.NewEvent, n)
	want := map[string]int64{} // cents per account
	for i := range n {
		account := fmt.Sprintf("acc_%d", i%accounts)
		cents := int64(100 + i)
		want[account] += cents
		payload := fmt.Sprintf(`{"type":"account.deposit","data":{"account_id":%q,"amount":"%d.%02d"}}`, account, cents/100, cents%100)
		events[i] = inbox.NewEvent{Source: "bank", Provider: "standardwebhooks", EventID: fmt.Sprintf("msg_%05d", i),
			EventType: "account.deposit", Payload: []byte(payload), Body: []byte(payload)}
	}
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{MaxAttempts: 10})
	require.NoError(t, err)
	res, err := inbox.NewIngester(db.Pool, client, &inbox.IngesterConfig{}).Ingest(ctx, events)
	require.NoError(t, err)
	require.Equal(t, n, res.New)

	config := writeConfig(t, db.URL)
	logs := &syncBuffer{}
	first := startLedger(t, bin, config, logs)
	// Kill mid-batch: some deposits applied, some jobs in flight.
	first.waitUntil(t, 60*time.Second, logs, func() bool {
		return countDone(t, db.Pool) >= 50 && countRunning(t, db.Pool) > 0
	})
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	<-first.exited
	doneAtKill := countDone(t, db.Pool)
	require.Less(t, doneAtKill, int64(n), "the batch finished before the kill; the test proves nothing")
	running := countRunning(t, db.Pool)
	require.Positive(t, running, "no job was in flight at the kill")
	t.Logf("killed with %d of %d done and %d jobs left running", doneAtKill, n, running)
	restart := time.Now()

	second := startLedger(t, bin, config, logs)
	second.waitUntil(t, 120*time.Second, logs, func() bool { return countDone(t, db.Pool) == n })

	t.Logf("all done %s after the restart", time.Since(restart).Round(time.Second))
	var entries, distinct int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT event_id) FROM ledger_entries`).Scan(&entries, &distinct))
	require.Equal(t, n, entries)
	require.Equal(t, n, distinct)
	for account, cents := range want {
		require.Equal(t, fmt.Sprintf("%d.%02d", cents/100, cents%100), balance(t, db, account), account)
	}

	// SIGTERM stops the worker gracefully: exit status 0.
	require.NoError(t, second.cmd.Process.Signal(syscall.SIGTERM))
	<-second.exited
	require.NoError(t, second.err, "logs:\n%s", logs)
}
