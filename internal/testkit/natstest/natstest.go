// Package natstest gives tests a NATS server with JetStream, and stream
// names of their own.
//
// URL returns the server a test should use: the one named by
// HOOKINBOX_TEST_NATS_URL, else the local server on 127.0.0.1:4222 when it
// answers with JetStream enabled, else a server started in the test's own
// process from the nats-server module (never a downloaded binary), on a
// random loopback port with its store in t.TempDir, shut down when the test
// ends. Start always starts such a server, for a test that stops and
// restarts it (an outage).
//
// Tests on one server stay apart by names: Stream returns a stream name and
// a subject prefix that no other test uses, and deletes the stream when the
// test ends.
//
// natstest is a test helper: only _test.go files import it, and only it and
// _test.go files import the nats-server module, which the depguard rules in
// .golangci.yaml enforce.
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// EnvURL names the environment variable that picks the server: a NATS URL,
// or "embedded" to start one in each test's process even when the local
// server answers.
const EnvURL = "HOOKINBOX_TEST_NATS_URL"

// LocalURL is the local server URL tries when EnvURL is unset.
const LocalURL = "nats://127.0.0.1:4222"

// probeTimeout bounds the check that the local server answers.
const probeTimeout = 2 * time.Second

var (
	localOnce sync.Once
	localOK   bool
)

// URL returns the URL of a NATS server with JetStream for tb: EnvURL's
// server, else LocalURL's when it answers with JetStream, else a server
// started for tb alone (see Start).
func URL(tb testing.TB) string {
	tb.Helper()
	switch env := os.Getenv(EnvURL); env {
	case "embedded":
		return Start(tb).URL()
	case "":
	default:
		return env
	}
	localOnce.Do(func() { localOK = probe(LocalURL) == nil })
	if localOK {
		return LocalURL
	}
	return Start(tb).URL()
}

// probe reports whether url answers with JetStream enabled.
func probe(url string) error {
	nc, err := nats.Connect(url, nats.Timeout(probeTimeout), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// Server is a NATS server with JetStream running in the test's process.
type Server struct {
	opts *server.Options
	srv  *server.Server
}

// Start starts a NATS server with JetStream in the test's process, on a
// random loopback port, its store in tb.TempDir, and shuts it down when the
// test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{opts: &server.Options{
		ServerName: "natstest",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   tb.TempDir(),
		NoLog:      true,
		NoSigs:     true,
	}}
	s.start(tb)
	// The port is kept for Restart.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	tb.Cleanup(s.Shutdown)
	return s
}

// start starts a server with s.opts and waits until it takes connections.
func (s *Server) start(tb testing.TB) {
	tb.Helper()
	srv, err := server.NewServer(s.opts)
	require.NoError(tb, err)
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		tb.Fatal("natstest: the NATS server did not take connections within 10s")
	}
	s.srv = srv
}

// URL returns the server's client URL, the same across Restart.
func (s *Server) URL() string {
	return "nats://" + net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
}

// Shutdown stops the server and waits until it has stopped; clients see
// the connection drop and try to reconnect. It may be called more than
// once.
func (s *Server) Shutdown() {
	if s.srv == nil {
		return
	}
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
	s.srv = nil
}

// Restart starts the server again, on the same port with the same store,
// after Shutdown (or shuts it down first); its streams and messages are
// kept.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Shutdown()
	s.start(tb)
}

// Stream returns a stream name and a subject prefix (one token, without a
// dot) that no other test uses, and deletes the stream from url's server,
// if the test made it, when the test ends.
func Stream(tb testing.TB, url string) (name, prefix string) {
	tb.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	suffix := hex.EncodeToString(b)
	name = "T_" + streamSafe(tb.Name()) + "_" + suffix
	prefix = "t_" + suffix
	tb.Cleanup(func() {
		nc, err := nats.Connect(url, nats.Timeout(probeTimeout), nats.NoReconnect())
		if err != nil {
			return // the server is gone (a test that stopped it), and with it the stream
		}
		defer nc.Close()
		js, err := jetstream.New(nc)
		require.NoError(tb, err)
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
			tb.Errorf("natstest: delete stream %s: %v", name, err)
		}
	})
	return name, prefix
}

// streamSafe turns a test's name into characters a stream name may hold,
// at most 40 of them.
func streamSafe(testName string) string {
	s := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, testName)
	if len(s) > 40 {
		s = s[:40]
	}
	return s
}
