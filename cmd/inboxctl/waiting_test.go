package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestEventsSayWhatARowWaitsFor is issue 42's point 4 through inboxctl's
// own commands against PostgreSQL: `events list` showed a paused source's
// held rows as pending beside a completed job, with nothing saying why
// they wait. Now its WAITING column, and `events show`'s waiting line,
// say it in the backlog metric's terms.
func TestEventsSayWhatARowWaitsFor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `database: {url: %q}
log: {level: warn}
sources:
  - {name: stripe, provider: stripe, secrets: [whsec_waiting_test]}
  - {name: paddle, provider: paddle, secrets: [pdl_ntfset_waiting_test]}
worker:
  routes: [{source: stripe, handlers: [log]}, {source: paddle, handlers: [log]}]
`, db.URL), 0o600))
	ts := serveReceiver(t, path, db)
	for _, ev := range []struct{ source, body string }{
		{"stripe", `{"id":"evt_a","type":"invoice.paid","data":{"object":{"id":"in_a"}}}`},
		{"stripe", `{"id":"evt_b","type":"invoice.paid","data":{"object":{"id":"in_b"}}}`},
		{"paddle", `{"event_id":"evt_c","event_type":"transaction.paid","occurred_at":"2026-12-01T00:00:00Z","data":{}}`},
	} {
		code, _, stderr := inboxctl(t, "--config", path, "send", "--source", ev.source, "--url", ts.URL, "--data", ev.body)
		require.Zero(t, code, stderr)
	}
	list := func() string {
		t.Helper()
		code, stdout, stderr := inboxctl(t, "--config", path, "events", "list")
		require.Zero(t, code, stderr)
		return stdout
	}
	row := func(out, eventID, waiting string) {
		t.Helper()
		require.Regexp(t, `(?m)^\d+\s+\S+\s+`+eventID+`\s+\S+\s+pending\s+`+regexp.QuoteMeta(waiting)+`\s+0\s`, out)
	}

	// No worker runs: every row waits for one.
	out := list()
	require.Contains(t, out, "WAITING")
	for _, id := range []string{"evt_a", "evt_b"} {
		row(out, id, "waiting: no worker routes stripe (queue default)")
	}
	row(out, "evt_c", "waiting: no worker routes paddle (queue default)")

	// A worker works the queue; evt_b is parked behind its key, the paddle
	// source paused.
	_, err := db.Pool.Exec(ctx, `
INSERT INTO hookinbox_worker_routes (worker_id, queue, routes, host, pid, expires_at)
VALUES ('w1', 'default', 'stripe * -> log; paddle * -> log; unrouted -> failed', 'test', 1, now() + interval '1 hour')`)
	require.NoError(t, err)
	store := inboxstore.New(db.Pool)
	b, err := store.Lookup(ctx, "stripe", "evt_b")
	require.NoError(t, err)
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, store.ParkSequenceTx(ctx, tx, &inboxstore.SequencePosition{Source: "stripe", Key: "cus_1", Order: "2", ReceivedAt: b.ReceivedAt, ID: b.ID}))
	require.NoError(t, tx.Commit(ctx))
	code, _, stderr := inboxctl(t, "--config", path, "sources", "pause", "paddle")
	require.Zero(t, code, stderr)

	out = list()
	t.Logf("inboxctl events list:\n%s", out)
	row(out, "evt_a", "-")
	row(out, "evt_b", "parked: behind cus_1")
	row(out, "evt_c", "held: source paused")
	code, stdout, stderr := inboxctl(t, "--config", path, "events", "show", "paddle", "evt_c")
	require.Zero(t, code, stderr)
	require.Regexp(t, `(?m)^waiting:\s+held: source paused$`, stdout)
	code, stdout, stderr = inboxctl(t, "--config", path, "events", "list", "--json")
	require.Zero(t, code, stderr)
	require.Contains(t, stdout, `"waiting": "parked: behind cus_1"`)

	// The backlog metric counts the same two rows as held.
	backlog, err := store.Backlog(ctx)
	require.NoError(t, err)
	held := map[string]int64{}
	for _, b := range backlog {
		if b.Status == inboxstore.BacklogHeld {
			held[b.Source] = b.Count
		}
	}
	require.Equal(t, map[string]int64{"stripe": 1, "paddle": 1}, held)
}
