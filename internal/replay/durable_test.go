package replay_test

import (
	"context"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/replay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// TestManagerCommitsDurably checks that the operator's replay actions
// (start, cancel, resume a run, replay one event), each reported done to
// the operator, commit with synchronous_commit on at least when the
// database sets it off: a trigger records the setting each write sees.
func TestManagerCommitsDurably(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	b.load(t, 2, inbox.StatusDone, "account.deposit")
	recorded := dbtest.RecordSynchronousCommit(t, b.db, "hookinbox_replay", "webhook_inbox", "river_job")
	pool := dbtest.SetSynchronousCommit(t, b.db, b.db.URL, "off")
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	manager, err := replay.NewManager(pool, client, &replay.Config{})
	require.NoError(t, err)

	run, err := manager.Start(ctx, &replay.StartParams{Selection: inboxstore.Selection{Source: "bank", Statuses: []inbox.Status{inbox.StatusDone}}})
	require.NoError(t, err)
	_, err = manager.Cancel(ctx, run.ID)
	require.NoError(t, err)
	_, err = manager.Resume(ctx, run.ID)
	require.NoError(t, err)
	_, err = manager.ReplayEvent(ctx, "bank", "evt_1")
	require.NoError(t, err)

	got := recorded()
	require.Subset(t, got, []string{"hookinbox_replay INSERT on", "hookinbox_replay UPDATE on", "river_job INSERT on", "webhook_inbox UPDATE on"})
	for _, w := range got {
		require.True(t, strings.HasSuffix(w, " on"), "a replay action's write at %q", w)
	}
}
