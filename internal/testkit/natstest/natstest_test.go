package natstest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// TestMain fails the package when a server or connection outlives its test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// connect returns a JetStream client of url's server, closed when the test
// ends.
func connect(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, nats.NoReconnect())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return js
}

func TestURL(t *testing.T) {
	t.Parallel()
	js := connect(t, URL(t))
	_, err := js.AccountInfo(t.Context())
	require.NoError(t, err, "JetStream is enabled")
}

func TestStart(t *testing.T) {
	t.Parallel()

	t.Run("RestartKeepsPortAndStreams", func(t *testing.T) {
		t.Parallel()
		srv := Start(t)
		url := srv.URL()
		stream, prefix := Stream(t, url)
		js := connect(t, url)
		_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}})
		require.NoError(t, err)
		_, err = js.Publish(t.Context(), prefix+".x", []byte("kept"))
		require.NoError(t, err)

		srv.Restart(t)
		require.Equal(t, url, srv.URL())
		s, err := connect(t, url).Stream(t.Context(), stream)
		require.NoError(t, err)
		require.Equal(t, uint64(1), s.CachedInfo().State.Msgs)
	})

	t.Run("ShutdownStopsIt", func(t *testing.T) {
		t.Parallel()
		srv := Start(t)
		srv.Shutdown()
		srv.Shutdown() // a second call does nothing
		_, err := nats.Connect(srv.URL(), nats.NoReconnect())
		require.ErrorIs(t, err, nats.ErrNoServers)
	})
}

func TestStream(t *testing.T) {
	t.Parallel()
	url := URL(t)
	js := connect(t, url)
	var stream string
	t.Cleanup(func() {
		_, err := js.Stream(context.Background(), stream)
		require.ErrorIs(t, err, jetstream.ErrStreamNotFound, "the stream is deleted when its test ends")
	})
	t.Run("Inner", func(t *testing.T) {
		t.Parallel()
		var prefix string
		stream, prefix = Stream(t, url)
		other, otherPrefix := Stream(t, url)
		require.NotEqual(t, stream, other)
		require.NotEqual(t, prefix, otherPrefix)
		require.NotContains(t, prefix, ".")
		_, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}})
		require.NoError(t, err, "the name is a valid stream name")
	})
}
