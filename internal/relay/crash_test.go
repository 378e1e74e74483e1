package relay_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// TestRelayKilledMidBatch kills a relay process with SIGKILL while its whole
// batch is in flight: the destination has received every message of the
// batch (and processed it, as far as the consumer knows) and holds its
// answers until the process is dead. Another relay takes over when the
// lease ends. Nothing is lost; the re-sent messages are exactly the killed
// batch, and a consumer deduplicating by webhook-id sees each message once.
func TestRelayKilledMidBatch(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and kills a subprocess")
	}
	const total, batch = 30, 10
	bin := proctest.Build(t, "./testdata/relay")[0]
	db := dbtest.New(t)
	s := newSink(t)
	s.hold = make(chan struct{})
	held := s.hold
	t.Cleanup(func() {
		select {
		case <-held:
		default:
			close(held)
		}
	})
	keys := enqueue(t, db, "billing", 0, total)

	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "DATABASE_URL="+db.URL, "SINK_URL="+s.server.URL, "SINK_SECRET="+testSecret,
		"RELAY_BATCH="+strconv.Itoa(batch), "RELAY_LEASE=1s")
	p := proctest.Start(t, cmd)
	p.WaitLine(t, "relay started")
	p.WaitUntil(t, 20*time.Second, func() bool {
		_, requests := s.counts(t)
		return requests == batch
	})
	p.Kill(t)
	s.mu.Lock()
	s.hold = nil
	s.mu.Unlock()
	close(held)

	startRelay(t, db, &relay.Config{PollInterval: 20 * time.Millisecond, Destinations: map[string]*relay.DestinationConfig{
		"billing": {Destination: s.destination(t)},
	}})
	waitFor(t, "all delivered", func() bool { return statusCounts(t, db)["delivered"] == total })
	got, requests := s.counts(t)
	duplicates := requests - total
	t.Logf("kill -9 mid-batch: %d messages, batch %d, %d requests, %d duplicates", total, batch, requests, duplicates)
	require.Len(t, got, total, "a message was lost")
	require.Equal(t, batch, duplicates, "re-sent: exactly the killed batch")
	for _, k := range keys {
		require.LessOrEqual(t, got[k], 2, k)
	}
	// The consumer's view after deduplicating by key: each message once.
	require.Len(t, got, len(keys))
}
