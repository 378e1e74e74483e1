package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/jetstream"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/natstest"
)

// TestJetStreamDestination relays messages to a real JetStream stream on
// subjects rendered from their source and type, each with Nats-Msg-Id set
// to its key; then every message is sent again (as after a relay crash),
// and the stream's duplicate window keeps one copy of each.
func TestJetStreamDestination(t *testing.T) {
	t.Parallel()
	url := natstest.URL(t)
	stream, prefix := natstest.Stream(t, url)
	db := dbtest.New(t)
	ctx := context.Background()
	dest, err := jetstream.NewDestination(ctx, &jetstream.DestinationConfig{
		Publisher: jetstream.Config{URL: url, Stream: stream, Subjects: []string{prefix + ".>"}, CreateStream: true},
		Subject:   prefix + ".{source}.{type}",
	})
	require.NoError(t, err)
	startRelay(t, db, &relay.Config{PollInterval: 20 * time.Millisecond, Destinations: map[string]*relay.DestinationConfig{
		"customers": {Destination: dest},
	}})
	keys := enqueue(t, db, "customers", 0, 5)
	waitFor(t, "all published", func() bool { return statusCounts(t, db)["delivered"] == 5 })

	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	s, err := js.Stream(ctx, stream)
	require.NoError(t, err)
	msgs := func() uint64 {
		info, err := s.Info(ctx)
		require.NoError(t, err)
		return info.State.Msgs
	}
	require.EqualValues(t, 5, msgs())
	first, err := s.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, prefix+".shop.order.paid", first.Subject)
	require.Contains(t, keys, first.Header.Get(nats.MsgIdHdr), "Nats-Msg-Id is the key")

	// Every message again: the relay publishes them a second time.
	_, err = db.Pool.Exec(ctx, `UPDATE hookinbox_outbox SET status = 'pending', next_attempt_at = now()`)
	require.NoError(t, err)
	waitFor(t, "all published again", func() bool { return statusCounts(t, db)["delivered"] == 5 })
	var attempts int
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT min(attempts) FROM hookinbox_outbox`).Scan(&attempts))
	require.Equal(t, 2, attempts)
	require.EqualValues(t, 5, msgs(), "the duplicate window kept one copy of each")
}
