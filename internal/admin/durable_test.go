package admin_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// TestActionsCommitDurably checks that the actions the admin API answers
// 2xx for (pause, resume, replay) commit with synchronous_commit on at
// least when the database sets it off: a trigger records the setting each
// of their writes sees.
func TestActionsCommitDurably(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := dbtest.New(t)
	// One done event, to replay.
	setupClient, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	res, err := inboxstore.NewIngester(db.Pool, setupClient, &inboxstore.IngesterConfig{}).Ingest(ctx, &inboxstore.Delivery{
		Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
		Events: []inboxstore.IncomingEvent{{ID: "evt_1", Type: "account.deposit", Payload: []byte(`{}`)}},
	})
	require.NoError(t, err)
	tx, err := db.Pool.Begin(ctx)
	require.NoError(t, err)
	_, err = inboxstore.New(db.Pool).Take(ctx, tx, []int64{res.Claimed[0].ID}, []int64{0}, time.Time{})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	recorded := dbtest.RecordSynchronousCommit(t, db, "hookinbox_source_pause", "webhook_inbox", "river_job")
	pool := dbtest.SetSynchronousCommit(t, db, db.URL, "off")
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	require.NoError(t, err)
	a, err := admin.New(pool, &admin.Config{Sources: []admin.Source{{Name: "bank", Provider: "standardwebhooks"}}, Client: client,
		QueueFor: func(string) string { return river.QueueDefault }})
	require.NoError(t, err)

	paused, err := a.Pause(ctx, "bank", "test", "")
	require.NoError(t, err)
	require.True(t, paused)
	_, err = a.Resume(ctx, "bank")
	require.NoError(t, err)
	info, err := a.Replay(ctx, "bank", "evt_1")
	require.NoError(t, err)
	require.Equal(t, inbox.StatusPending, info.Status)

	got := recorded()
	require.Subset(t, got, []string{"hookinbox_source_pause INSERT on", "hookinbox_source_pause DELETE on",
		"webhook_inbox UPDATE on", "river_job INSERT on"})
	for _, w := range got {
		require.True(t, strings.HasSuffix(w, " on"), "an action's write at %q", w)
	}
}
