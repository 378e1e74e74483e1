package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// TestClaimCommitsDurably checks the setting under which the relay's claim
// commits: a trigger records synchronous_commit as the claim's UPDATE sees
// it. A database set to off is raised to on; local and remote_apply are
// kept (the claim must never weaken a stronger setting).
func TestClaimCommitsDurably(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ database, claim string }{
		{"off", "on"}, {"local", "on"}, {"remote_write", "on"}, {"remote_apply", "remote_apply"},
	} {
		t.Run("DatabaseSetTo_"+tc.database, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := dbtest.New(t)
			tx, err := db.Pool.Begin(ctx)
			require.NoError(t, err)
			ev := &inbox.Event{Source: "stripe", EventID: "evt_1", EventType: "invoice.paid"}
			_, err = outbox.Enqueue(ctx, tx, ev, outbox.Message{Destination: "billing", Payload: []byte(`{}`)})
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))
			recorded := dbtest.RecordSynchronousCommit(t, db, "hookinbox_outbox")
			pool := dbtest.SetSynchronousCommit(t, db, db.URL, tc.database)

			recs, err := relay.NewStore(pool).Claim(ctx, "billing", 10, time.Minute)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, []string{"hookinbox_outbox UPDATE " + tc.claim}, recorded())
		})
	}
}
