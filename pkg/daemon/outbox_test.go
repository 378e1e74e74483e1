package daemon_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// TestInboxctlOutbox drives `inboxctl outbox`: list failed messages and
// disabled destinations, replay, enable.
func TestInboxctlOutbox(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds inboxctl")
	}
	db := dbtest.New(t)
	ctx := context.Background()
	for _, id := range []string{"evt_1", "evt_2", "evt_3"} {
		_, err := outbox.Enqueue(ctx, db.Pool, &inbox.Event{Source: "stripe", EventID: id, EventType: "invoice.paid"},
			outbox.Message{Destination: "billing", Payload: []byte(`{}`)})
		require.NoError(t, err)
	}
	_, err := db.Pool.Exec(ctx, `UPDATE hookinbox_outbox SET status = 'failed', attempts = 20, last_error = 'POST answered 500'
WHERE event_id <> 'evt_3'`)
	require.NoError(t, err)
	require.NoError(t, relay.NewStore(db.Pool).Disable(ctx, "billing", "POST answered 410 Gone"))
	path := writeConfig(t, daemonConfig(db.URL))

	code, out := run(t, "inboxctl", "outbox", "list", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "stripe:evt_1:billing")
	require.Contains(t, out, "stripe:evt_2:billing")
	require.NotContains(t, out, "stripe:evt_3:billing", "pending messages are not listed by default")
	require.Contains(t, out, "POST answered 500")
	require.Contains(t, out, "destination billing disabled since")

	code, out = run(t, "inboxctl", "outbox", "replay", "--config", path)
	require.Equal(t, 2, code, out)
	code, out = run(t, "inboxctl", "outbox", "replay", "stripe:evt_1:billing", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "replayed 1 failed message\n")
	code, out = run(t, "inboxctl", "outbox", "replay", "--all", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "replayed 1 failed message\n")
	var failed int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_outbox WHERE status = 'failed'`).Scan(&failed))
	require.Zero(t, failed)

	code, out = run(t, "inboxctl", "outbox", "enable", "billing", "--config", path)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "enabled billing")
	code, out = run(t, "inboxctl", "outbox", "enable", "billing", "--config", path)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "billing is not disabled")
}
