package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// TestPausedSourceWaitsThenDrains runs a receiver and two worker processes:
// a paused source's deliveries are still answered 2xx and stored, both
// workers hold its events (pending, no attempt spent, no job), and after
// `inboxctl sources resume` every event is processed exactly once.
func TestPausedSourceWaitsThenDrains(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	ctx := context.Background()
	path := writeConfig(t, fmt.Sprintf(`
database: {url: %q}
receiver: {listen: "127.0.0.1:0"}
worker:
  listen: "127.0.0.1:0"
  pause_refresh: 100ms
  concurrency: 4
  routes: [{source: bank, handlers: [noop]}]
sources:
  - {name: bank, provider: standardwebhooks, secrets: [%q]}
`, db.URL, secretValue))

	rcv := start(t, "receiver", "--config", path)
	addr := listenAddr(t, rcv, "receiver")
	rcv.WaitLine(t, "receiver accepting webhooks")
	workers := []*proctest.Process{start(t, "worker", "--config", path), start(t, "worker", "--config", path)}
	for _, w := range workers {
		w.WaitLine(t, "worker started")
	}

	code, out := run(t, "inboxctl", "--config", path, "sources", "pause", "bank", "--reason", "ledger migration")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "paused bank")
	// Both workers have seen the pause before anything is sent.
	for _, w := range workers {
		w.WaitLine(t, "source paused", `"source":"bank"`)
	}

	const n = 20
	for i := range n {
		require.Equal(t, http.StatusOK, postWebhook(t, addr, fmt.Sprintf("msg_pause_%02d", i)), "a paused source's deliveries are still accepted")
	}
	// Every event is held: its job ran, found the source paused, and left
	// the row pending with no job and no attempt counted.
	held := func() (held, other int) {
		require.NoError(t, db.Pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'pending' AND held_at IS NOT NULL AND note = $1 AND attempts = 0),
       count(*) FILTER (WHERE NOT (status = 'pending' AND held_at IS NOT NULL AND note = $1 AND attempts = 0))
FROM webhook_inbox WHERE source = 'bank'`, inboxstore.NoteHeld).Scan(&held, &other))
		return held, other
	}
	waitFor(t, "every event to be held", func() bool { h, _ := held(); return h == n })
	_, other := held()
	require.Zero(t, other, "no event was processed while paused")
	// Their jobs complete (River's completer batches, so shortly after the
	// hold): a held event keeps no job busy or retrying.
	waitFor(t, "the held events' jobs to complete", func() bool {
		var unfinished int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = $1 AND state <> 'completed'`, inboxstore.JobKind).Scan(&unfinished))
		return unfinished == 0
	})
	_, other = held()
	require.Zero(t, other, "no event was processed while paused")

	code, out = run(t, "inboxctl", "--config", path, "sources", "list", "--json")
	require.Equal(t, 0, code, out)
	var sources []admin.SourceStatus
	require.NoError(t, json.Unmarshal([]byte(out), &sources))
	require.Len(t, sources, 1)
	require.True(t, sources[0].Paused)
	require.Equal(t, "ledger migration", sources[0].Reason)
	require.EqualValues(t, n, sources[0].Held)

	code, out = run(t, "inboxctl", "--config", path, "sources", "resume", "bank")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, fmt.Sprintf("%d held events enqueued", n))

	waitFor(t, "every event to be done", func() bool {
		var done int
		require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE source = 'bank' AND status = 'done'`).Scan(&done))
		return done == n
	})
	var attempts, notes int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT sum(attempts), count(note) FROM webhook_inbox WHERE source = 'bank'`).Scan(&attempts, &notes))
	require.Equal(t, n, attempts, "each event was processed once")
	require.Zero(t, notes, "the held note is cleared")

	code, out = run(t, "inboxctl", "--config", path, "sources", "resume", "bank")
	require.Equal(t, 0, code, out, "resume of a running source exits as pause of a paused one does")
	require.Contains(t, out, "bank was not paused")
	code, out = run(t, "inboxctl", "--config", path, "sources", "pause", "nosuch")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "no such source")
}
