package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/natstest"
)

// testBundle is one test's server, stream and publisher.
type testBundle struct {
	url    string
	stream string // created by the publisher over prefix.>
	prefix string // this test's subjects begin with prefix + "."
	pub    *Publisher
	js     natsjs.JetStream // a second client, to look at what the stream holds
}

// setup connects a publisher that creates a stream of the test's own over
// prefix.>.
func setup(t *testing.T) *testBundle {
	t.Helper()
	url := natstest.URL(t)
	stream, prefix := natstest.Stream(t, url)
	pub, err := New(t.Context(), Config{
		URL:          url,
		Stream:       stream,
		Subjects:     []string{prefix + ".>"},
		CreateStream: true,
	})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	return &testBundle{url: url, stream: stream, prefix: prefix, pub: pub, js: client(t, url)}
}

// client connects a plain JetStream client, closed when the test ends.
func client(t *testing.T, url string) natsjs.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := natsjs.New(nc)
	require.NoError(t, err)
	return js
}

// streamInfo returns what the stream holds now.
func (b *testBundle) streamInfo(t *testing.T, name string) *natsjs.StreamInfo {
	t.Helper()
	s, err := b.js.Stream(t.Context(), name)
	require.NoError(t, err)
	info, err := s.Info(t.Context())
	require.NoError(t, err)
	return info
}

func TestPublish(t *testing.T) {
	t.Parallel()

	t.Run("SameIDWithinTheWindowIsStoredOnce", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		subject := b.prefix + ".invoice.paid"

		first, err := b.pub.PublishAck(t.Context(), subject, "stripe:evt_1:nats", []byte("one"), nil)
		require.NoError(t, err)
		require.Equal(t, Ack{Stream: b.stream, Sequence: 1, Duplicate: false}, *first)

		again, err := b.pub.PublishAck(t.Context(), subject, "stripe:evt_1:nats", []byte("one"), nil)
		require.NoError(t, err)
		require.Equal(t, Ack{Stream: b.stream, Sequence: 1, Duplicate: true}, *again)
		require.NoError(t, b.pub.Publish(t.Context(), subject, "stripe:evt_1:nats", []byte("one"), nil),
			"a duplicate is a success")
		require.Equal(t, uint64(1), b.streamInfo(t, b.stream).State.Msgs)

		other, err := b.pub.PublishAck(t.Context(), subject, "stripe:evt_2:nats", []byte("two"), nil)
		require.NoError(t, err)
		require.Equal(t, Ack{Stream: b.stream, Sequence: 2, Duplicate: false}, *other)
		require.Equal(t, uint64(2), b.streamInfo(t, b.stream).State.Msgs)
	})

	t.Run("CarriesDataIDAndHeaders", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		subject := b.prefix + ".customer.created"
		headers := map[string]string{"Hookinbox-Source": "stripe", "hookinbox-event-type": "customer.created"}
		ack, err := b.pub.PublishAck(t.Context(), subject, "stripe:evt_9:nats", []byte(`{"id":"evt_9"}`), headers)
		require.NoError(t, err)

		s, err := b.js.Stream(t.Context(), b.stream)
		require.NoError(t, err)
		msg, err := s.GetMsg(t.Context(), ack.Sequence)
		require.NoError(t, err)
		require.Equal(t, subject, msg.Subject)
		require.Equal(t, `{"id":"evt_9"}`, string(msg.Data))
		require.Equal(t, "stripe:evt_9:nats", msg.Header.Get(natsjs.MsgIDHeader))
		require.Equal(t, "stripe", msg.Header.Get("Hookinbox-Source"))
		require.Equal(t, "customer.created", msg.Header.Get("hookinbox-event-type"), "header names keep their case")
	})

	t.Run("NoStreamIsAnError", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		_, prefix := natstest.Stream(t, url)
		pub, err := New(t.Context(), Config{URL: url})
		require.NoError(t, err)
		t.Cleanup(pub.Close)

		err = pub.Publish(t.Context(), prefix+".nobody.listens", "id-1", []byte("x"), nil)
		require.ErrorIs(t, err, ErrNoStream)
	})

	t.Run("SubjectOutsideTheStreamIsAnError", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, otherPrefix := natstest.Stream(t, b.url)
		err := b.pub.Publish(t.Context(), otherPrefix+".x", "id-1", []byte("x"), nil)
		require.ErrorIs(t, err, ErrNoStream)
		require.Equal(t, uint64(0), b.streamInfo(t, b.stream).State.Msgs)
	})

	t.Run("SubjectOfAnotherStreamIsRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		other, otherPrefix := natstest.Stream(t, b.url)
		_, err := b.js.CreateStream(t.Context(), natsjs.StreamConfig{Name: other, Subjects: []string{otherPrefix + ".>"}})
		require.NoError(t, err)

		err = b.pub.Publish(t.Context(), otherPrefix+".x", "id-1", []byte("x"), nil)
		require.Error(t, err)
		require.ErrorContains(t, err, "expected stream does not match")
		require.Equal(t, uint64(0), b.streamInfo(t, other).State.Msgs)
	})

	t.Run("ReturnsTheAckItWaitedFor", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		_, prefix := natstest.Stream(t, url)
		pub, err := New(t.Context(), Config{URL: url})
		require.NoError(t, err)
		t.Cleanup(pub.Close)
		// A responder that stands in for a stream and answers only when the
		// test says so.
		requests := respond(t, url, prefix+".slow")

		done := make(chan publishResult, 1)
		go func() {
			ack, err := pub.PublishAck(context.Background(), prefix+".slow", "id-7", []byte("x"), nil)
			done <- publishResult{ack, err}
		}()
		req := <-requests
		require.Equal(t, "id-7", req.Header.Get(natsjs.MsgIDHeader))
		require.NoError(t, req.Respond([]byte(`{"stream":"STAND_IN","seq":42,"duplicate":true}`)))
		res := <-done
		require.NoError(t, res.err)
		require.Equal(t, Ack{Stream: "STAND_IN", Sequence: 42, Duplicate: true}, *res.ack)
	})

	t.Run("CancellationWhileWaitingIsAnError", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		_, prefix := natstest.Stream(t, url)
		pub, err := New(t.Context(), Config{URL: url, AckTimeout: time.Minute})
		require.NoError(t, err)
		t.Cleanup(pub.Close)
		requests := respond(t, url, prefix+".silent")

		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- pub.Publish(ctx, prefix+".silent", "id-1", []byte("x"), nil) }()
		<-requests // sent; no ack will come
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})

	t.Run("NoAckWithinAckTimeoutIsAnError", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		_, prefix := natstest.Stream(t, url)
		pub, err := New(t.Context(), Config{URL: url, AckTimeout: 200 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(pub.Close)
		requests := respond(t, url, prefix+".silent")

		started := time.Now()
		err = pub.Publish(context.Background(), prefix+".silent", "id-1", []byte("x"), nil)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "no ack within 200ms")
		require.GreaterOrEqual(t, time.Since(started), 200*time.Millisecond)
		require.Len(t, requests, 1, "the message was sent, its ack never came")
	})

	t.Run("CancelledContextPublishesNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := b.pub.Publish(ctx, b.prefix+".x", "id-1", []byte("x"), nil)
		require.ErrorIs(t, err, context.Canceled)
		require.Equal(t, uint64(0), b.streamInfo(t, b.stream).State.Msgs)
	})

	t.Run("RefusesWhatCannotBeSent", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		subject := b.prefix + ".x"
		for _, h := range []map[string]string{
			{"Nats-Expected-Last-Sequence": "0"},
			{"nats-msg-id": "other"},
			{"Bad:Name": "v"},
			{"Bad Name": "v"},
			{"": "v"},
			{"Fine": "line\r\nInjected: yes"},
		} {
			require.ErrorIs(t, b.pub.Publish(t.Context(), subject, "id-1", nil, h), ErrInvalidHeader, "%v", h)
		}
		require.ErrorIs(t, b.pub.Publish(t.Context(), subject, "", nil, nil), ErrInvalidHeader)
		require.ErrorIs(t, b.pub.Publish(t.Context(), subject, "id\n2", nil, nil), ErrInvalidHeader)
		require.ErrorIs(t, b.pub.Publish(t.Context(), b.prefix+".*", "id-1", nil, nil), ErrInvalidSubject)
		require.ErrorIs(t, b.pub.Publish(t.Context(), b.prefix+"..x", "id-1", nil, nil), ErrInvalidSubject)
		require.Equal(t, uint64(0), b.streamInfo(t, b.stream).State.Msgs)
	})

	t.Run("ClosedPublisherFails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.pub.Close()
		require.ErrorIs(t, b.pub.Publish(t.Context(), b.prefix+".x", "id-1", nil, nil), nats.ErrConnectionClosed)
	})
}

// publishResult is what a PublishAck in a goroutine returned.
type publishResult struct {
	ack *Ack
	err error
}

// respond subscribes a core NATS client to subject and hands each request to
// the test, which may answer it or not.
func respond(t *testing.T, url, subject string) <-chan *nats.Msg {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	requests := make(chan *nats.Msg, 16)
	_, err = nc.ChanSubscribe(subject, requests)
	require.NoError(t, err)
	require.NoError(t, nc.Flush())
	return requests
}

func TestNew(t *testing.T) {
	t.Parallel()

	t.Run("CreatesTheStreamWithTheDuplicateWindow", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		for _, tc := range []struct {
			duplicates, want time.Duration
		}{{0, DuplicatesDefault}, {30 * time.Second, 30 * time.Second}} {
			stream, prefix := natstest.Stream(t, url)
			pub, err := New(t.Context(), Config{
				URL: url, Stream: stream, Subjects: []string{prefix + ".>"}, CreateStream: true, Duplicates: tc.duplicates,
			})
			require.NoError(t, err)
			pub.Close()
			s, err := client(t, url).Stream(t.Context(), stream)
			require.NoError(t, err)
			cfg := s.CachedInfo().Config
			require.Equal(t, tc.want, cfg.Duplicates)
			require.Equal(t, []string{prefix + ".>"}, cfg.Subjects)
			require.Equal(t, natsjs.FileStorage, cfg.Storage)
		}
	})

	t.Run("UpdatesAnExistingStreamAndKeepsItsMessages", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		js := client(t, url)
		stream, prefix := natstest.Stream(t, url)
		_, err := js.CreateStream(t.Context(), natsjs.StreamConfig{
			Name: stream, Subjects: []string{prefix + ".a"}, Duplicates: time.Minute, MaxMsgs: 1000,
		})
		require.NoError(t, err)
		_, err = js.Publish(t.Context(), prefix+".a", []byte("kept"))
		require.NoError(t, err)

		pub, err := New(t.Context(), Config{
			URL: url, Stream: stream, Subjects: []string{prefix + ".a", prefix + ".b"}, CreateStream: true,
			Duplicates: 30 * time.Second,
		})
		require.NoError(t, err)
		t.Cleanup(pub.Close)
		require.NoError(t, pub.Publish(t.Context(), prefix+".b", "id-b", []byte("new"), nil))

		s, err := js.Stream(t.Context(), stream)
		require.NoError(t, err)
		info, err := s.Info(t.Context())
		require.NoError(t, err)
		require.Equal(t, []string{prefix + ".a", prefix + ".b"}, info.Config.Subjects)
		require.Equal(t, 30*time.Second, info.Config.Duplicates)
		require.Equal(t, int64(1000), info.Config.MaxMsgs, "settings New does not own are kept")
		require.Equal(t, uint64(2), info.State.Msgs)
	})

	t.Run("TwoPublishersCreateOneStream", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		stream, prefix := natstest.Stream(t, url)
		errs := make(chan error, 2)
		// Different windows: the one that loses the race to create the
		// stream finds it taken with other settings, and updates it.
		for _, duplicates := range []time.Duration{30 * time.Second, 45 * time.Second} {
			go func() {
				pub, err := New(t.Context(), Config{
					URL: url, Stream: stream, Subjects: []string{prefix + ".>"}, CreateStream: true, Duplicates: duplicates,
				})
				if err == nil {
					pub.Close()
				}
				errs <- err
			}()
		}
		require.NoError(t, <-errs)
		require.NoError(t, <-errs)
	})

	t.Run("NamedStreamMustExistWithoutCreateStream", func(t *testing.T) {
		t.Parallel()
		url := natstest.URL(t)
		stream, prefix := natstest.Stream(t, url)
		_, err := New(t.Context(), Config{URL: url, Stream: stream, Subjects: []string{prefix + ".>"}})
		require.ErrorIs(t, err, natsjs.ErrStreamNotFound)
	})

	t.Run("ValidatesTheConfig", func(t *testing.T) {
		t.Parallel()
		for want, cfg := range map[string]Config{
			"URL is required":                        {},
			"AckTimeout must not be negative":        {URL: "nats://127.0.0.1:1", AckTimeout: -1},
			"Duplicates must not be negative":        {URL: "nats://127.0.0.1:1", Duplicates: -1},
			"Stream is required with CreateStream":   {URL: "nats://127.0.0.1:1", CreateStream: true, Subjects: []string{"a"}},
			"Subjects is required with CreateStream": {URL: "nats://127.0.0.1:1", CreateStream: true, Stream: "S"},
		} {
			_, err := New(t.Context(), cfg)
			require.ErrorContains(t, err, want)
		}
	})

	t.Run("UnreachableServerFails", func(t *testing.T) {
		t.Parallel()
		srv := natstest.Start(t)
		srv.Shutdown()
		_, err := New(t.Context(), Config{URL: srv.URL()})
		require.ErrorIs(t, err, nats.ErrNoServers)
	})
}

// TestOutage stops the server under a publisher: publishing fails while it
// is down, succeeds once it is back, and the duplicate window survives the
// restart, so a re-send after the outage is not stored twice.
func TestOutage(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	stream, prefix := natstest.Stream(t, srv.URL())
	pub, err := New(t.Context(), Config{
		URL: srv.URL(), Stream: stream, Subjects: []string{prefix + ".>"}, CreateStream: true,
		AckTimeout: 500 * time.Millisecond,
	})
	require.NoError(t, err)
	t.Cleanup(pub.Close)
	subject := prefix + ".x"
	require.NoError(t, pub.Publish(t.Context(), subject, "before", []byte("1"), nil))

	srv.Shutdown()
	require.Error(t, pub.Publish(t.Context(), subject, "during", []byte("2"), nil))

	srv.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	var ack *Ack
	for {
		ack, err = pub.PublishAck(t.Context(), subject, "before", []byte("1"), nil)
		if err == nil || time.Now().After(deadline) {
			break
		}
		require.NotErrorIs(t, err, ErrInvalidSubject)
	}
	require.NoError(t, err, "the publisher did not reconnect within 15s")
	require.True(t, ack.Duplicate, "the duplicate window survives a restart")
	require.Equal(t, uint64(1), ack.Sequence)
}
