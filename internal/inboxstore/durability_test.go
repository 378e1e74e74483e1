package inboxstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// TestDurabilityVerdicts checks what an operator is told a 2xx survives,
// and which requirement each server meets, from the server's settings.
func TestDurabilityVerdicts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		d     inboxstore.Durability
		says  string
		state string
		meets string // the strongest requirement met
	}{
		{
			name: "NoStandby", d: inboxstore.Durability{Fsync: "on", FullPageWrites: "on", Claim: "on"},
			says:  "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: no (no synchronous standby)",
			state: "none", meets: inboxstore.RequireServerCrash,
		},
		{
			name: "SynchronousStandbyStreaming", d: inboxstore.Durability{Fsync: "on", FullPageWrites: "on", Claim: "on", Standbys: "*", Streaming: 1},
			says:  "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: yes",
			state: `"*", 1 streaming`, meets: inboxstore.RequireServerLoss,
		},
		{
			name: "SynchronousStandbyNoneStreaming", d: inboxstore.Durability{Fsync: "on", FullPageWrites: "on", Claim: "on", Standbys: "ANY 1 (a, b)"},
			says:  "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: yes",
			state: `"ANY 1 (a, b)", none streaming (commits wait for one)`, meets: inboxstore.RequireServerLoss,
		},
		{
			name: "StreamingUnknown", d: inboxstore.Durability{Fsync: "on", FullPageWrites: "on", Claim: "on", Standbys: "*", Streaming: -1},
			says:  "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: yes",
			state: `"*", streaming unknown (reading pg_stat_replication needs pg_monitor)`, meets: inboxstore.RequireServerLoss,
		},
		{
			name: "RemoteWriteKept", d: inboxstore.Durability{Fsync: "on", FullPageWrites: "on", Claim: "remote_write", Standbys: "*", Streaming: 1},
			says: "a 2xx survives a process crash: yes, a server crash: yes, the loss of this server: " +
				"yes (the standby has written the WAL, not flushed it: not if its machine crashes too)",
			state: `"*", 1 streaming`, meets: inboxstore.RequireServerLoss,
		},
		{
			name: "FsyncOff", d: inboxstore.Durability{Fsync: "off", FullPageWrites: "on", Claim: "on", Standbys: "*", Streaming: 1},
			says:  "a 2xx survives a process crash: yes, a server crash: no (fsync is off), the loss of this server: yes",
			state: `"*", 1 streaming`, meets: inboxstore.RequireNone,
		},
		{
			name: "FullPageWritesOff", d: inboxstore.Durability{Fsync: "on", FullPageWrites: "off", Claim: "on"},
			says:  "a 2xx survives a process crash: yes, a server crash: no (full_page_writes is off), the loss of this server: no (no synchronous standby)",
			state: "none", meets: inboxstore.RequireNone,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.says, tc.d.String())
			require.Equal(t, tc.state, tc.d.StandbyState())
			met := true
			for _, r := range []string{inboxstore.RequireNone, inboxstore.RequireServerCrash, inboxstore.RequireServerLoss} {
				err := tc.d.Meets(r)
				if met {
					require.NoError(t, err, r)
				} else {
					require.ErrorIs(t, err, inboxstore.ErrDurability, r)
				}
				if r == tc.meets {
					met = false
				}
			}
		})
	}
}
