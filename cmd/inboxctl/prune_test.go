package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/bulkload"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// writeStripeConfig writes a config of one stripe source on databaseURL,
// with the source keys extra ("retention: 1h") and one route, and returns
// its path.
func writeStripeConfig(t *testing.T, databaseURL, extra string) string {
	t.Helper()
	source := "{name: stripe, provider: stripe, secrets: [whsec_prune_test]}"
	if extra != "" {
		source = "{name: stripe, provider: stripe, secrets: [whsec_prune_test], " + extra + "}"
	}
	yaml := fmt.Sprintf(`database: {url: %q}
log: {level: warn}
sources: [%s]
worker:
  routes: [{source: stripe, handlers: [log]}]
`, databaseURL, source)
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

// inboxctl runs inboxctl's command line in this process, as the binary's
// main does, and returns its exit status and what it wrote.
func inboxctl(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// TestPruneKeepsTheDedupWindow is issue 38's point 4 through inboxctl's own
// commands against PostgreSQL: with `retention: 1h` on a Stripe source
// (Stripe resends an event for 30 days), `inboxctl prune` deleted a done
// row 2 h old, the same event resent was claimed as new, and its handlers
// would have run a second time. Now inboxctl refuses that config for prune,
// and for every other verb that rewrites inbox rows, with the worker's own
// words, and the resent event is a duplicate.
func TestPruneKeepsTheDedupWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	valid := writeStripeConfig(t, db.URL, "")
	short := writeStripeConfig(t, db.URL, "retention: 1h")

	// What the worker daemon says of the short retention.
	_, err := config.Load(short, config.NeedDatabase|config.NeedWorker)
	require.Error(t, err, "the worker refuses a retention inside the redelivery window")
	const problem = "sources[stripe].retention: 1h0m0s is shorter than stripe's redelivery window (720h0m0s)"
	require.Contains(t, err.Error(), problem)

	ts := serveReceiver(t, valid, db)

	// A done stripe event received 2 h ago by the database's clock.
	store := inboxstore.New(db.Pool)
	now, err := store.Now(ctx)
	require.NoError(t, err)
	const eventID = "evt_prune_window"
	body := `{"id":"` + eventID + `","type":"invoice.paid","data":{"object":{"id":"in_1"}}}`
	first, err := bulkload.ReserveIDs(ctx, db.Pool, 1)
	require.NoError(t, err)
	require.NoError(t, bulkload.Load(ctx, db.Pool, 1, func(int) (*bulkload.Row, error) {
		return &bulkload.Row{
			ID: first, Status: inbox.StatusDone, ReceivedAt: now.Add(-2 * time.Hour), ProcessedAt: now.Add(-2 * time.Hour),
			Delivery: &inboxstore.Delivery{
				Source: "stripe", Provider: "stripe", Body: []byte(body),
				Events: []inboxstore.IncomingEvent{{ID: eventID, Type: "invoice.paid", Payload: []byte(body)}},
			},
		}, nil
	}))
	resend := func() string {
		t.Helper()
		code, stdout, stderr := inboxctl(t, "--config", valid, "send", "--source", "stripe", "--url", ts.URL, "--data", body)
		require.Zero(t, code, stderr)
		return stdout
	}
	require.Contains(t, resend(), `"duplicates":1`, "inside the window, a resend is a duplicate")

	code, stdout, stderr := inboxctl(t, "prune", "--config", short)
	require.NotZero(t, code, "prune ran under a retention inside the redelivery window:\n%s", stdout)
	require.Contains(t, stderr, problem)
	info, err := store.Lookup(ctx, "stripe", eventID)
	require.NoError(t, err, "the done row is still there")
	require.Equal(t, inbox.StatusDone, info.Status)
	require.Contains(t, resend(), `"new":0`, "the resent event is not claimed again")
	info, err = store.Lookup(ctx, "stripe", eventID)
	require.NoError(t, err)
	require.Equal(t, inbox.StatusDone, info.Status, "its handlers do not run a second time")

	// Every other verb that rewrites inbox rows refuses it too.
	for _, verb := range [][]string{
		{"prune", "--dry-run"},
		{"events", "purge", eventID, "--source", "stripe", "--yes"},
		{"replay", "stripe", eventID},
		{"replay", "--source", "stripe", "--status", "done", "--yes"},
		{"sources", "pause", "stripe"},
		{"sources", "resume", "stripe"},
	} {
		code, stdout, stderr := inboxctl(t, append(verb, "--config", short)...)
		require.NotZero(t, code, "inboxctl %s ran under a retention inside the redelivery window: %s", strings.Join(verb, " "), stdout)
		require.Contains(t, stderr, problem, "inboxctl %s", strings.Join(verb, " "))
	}

	// Under the valid config, prune keeps the row too: 2 h is inside
	// Stripe's 30 days.
	code, stdout, stderr = inboxctl(t, "prune", "--config", valid)
	require.Zero(t, code, stderr)
	require.Regexp(t, `stripe\s+720h0m0s\s+0\s+0`, stdout)
}
