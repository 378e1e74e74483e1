// Package natstest gives tests a NATS server with JetStream, and stream
// names of their own.
//
// URL returns the server a test should use: the one named by
// HOOKINBOX_TEST_NATS_URL, else the local server on 127.0.0.1:4222 when it
// answers with JetStream enabled, else a nats-server started for the test
// (Start). Start always starts one: Debian's nats-server binary (apt-get
// install nats-server; .ci/run installs it) as a subprocess, on a free
// loopback port with its store in t.TempDir, stopped when the test ends;
// it skips the test when there is no binary. A test that stops and
// restarts the server (an outage) uses Start.
//
// Tests on one server stay apart by names: Stream returns a stream name and
// a subject prefix that no other test uses, and deletes the stream when the
// test ends.
//
// natstest is a test helper: only _test.go files import it, which the
// depguard rules in .golangci.yaml enforce. The product module does not
// require the nats-server module.
package natstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
)

// EnvURL names the environment variable that picks the server: a NATS URL,
// or "start" to start a nats-server for each test even when the local
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
	case "start":
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

// Required is URL for a test that must not skip without NATS (the soak,
// whose promises include the outbox's NATS destination): where URL would
// skip, because no server answers and there is no nats-server binary to
// start, it fails tb, saying so.
func Required(tb testing.TB) string {
	tb.Helper()
	env := os.Getenv(EnvURL)
	if env == "" {
		localOnce.Do(func() { localOK = probe(LocalURL) == nil })
	}
	if (env == "start" || env == "" && !localOK) && Find() == "" {
		tb.Fatalf("natstest: this test needs NATS with JetStream: none answers on %s and there is no nats-server binary to start one "+
			"(apt-get install nats-server, which .ci/run does; or set %s to a server's URL)", LocalURL, EnvURL)
	}
	return URL(tb)
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

// Server is a NATS server with JetStream running as a subprocess of the
// test: Debian's nats-server binary (see Find).
type Server struct {
	bin, dir string
	port     int
	cmd      *exec.Cmd
	// done is closed when cmd has exited; stderr is its output then.
	done   chan struct{}
	stderr *bytes.Buffer
}

// Find returns Debian's nats-server (in /usr/sbin, which a non-root PATH
// may leave out) or the one on PATH, or "" when there is none.
func Find() string {
	if path, err := exec.LookPath("nats-server"); err == nil {
		return path
	}
	if _, err := os.Stat("/usr/sbin/nats-server"); err == nil {
		return "/usr/sbin/nats-server"
	}
	return ""
}

// Start starts a nats-server with JetStream as a subprocess, on a free
// loopback port, its store in tb.TempDir, and stops it when the test ends.
// It skips tb when there is no nats-server binary (apt-get install
// nats-server; .ci/run installs it).
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := Find()
	if bin == "" {
		tb.Skip("natstest: no nats-server binary (apt-get install nats-server)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(tb, ln.Close()) // The server binds it next; the port is kept for Restart.
	s := &Server{bin: bin, dir: tb.TempDir(), port: port}
	s.start(tb)
	tb.Cleanup(s.Shutdown)
	return s
}

// start runs the binary on s's port and store and waits until it answers
// with JetStream enabled.
func (s *Server) start(tb testing.TB) {
	tb.Helper()
	s.stderr = &bytes.Buffer{}
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", s.dir)
	s.cmd.Stdout, s.cmd.Stderr = s.stderr, s.stderr
	require.NoError(tb, s.cmd.Start())
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	s.done = done
	deadline := time.Now().Add(startTimeout)
	for {
		err := probe(s.URL())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.Shutdown()
			tb.Fatalf("natstest: nats-server did not answer within %s: %v\n%s", startTimeout, err, s.stderr)
		}
		// Polls the condition, with the deadline above; an exit ends it.
		select {
		case <-done:
			s.cmd = nil
			tb.Fatalf("natstest: nats-server exited before it answered:\n%s", s.stderr)
		case <-time.After(startPoll):
		}
	}
}

// startTimeout bounds the wait for a started server to answer; startPoll is
// the pace of that wait.
const (
	startTimeout = 10 * time.Second
	startPoll    = 20 * time.Millisecond
)

// URL returns the server's client URL, the same across Restart.
func (s *Server) URL() string {
	return "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// Shutdown stops the server (SIGTERM, which makes nats-server flush its
// store and exit; SIGKILL if it has not within 10s) and waits until it has
// exited; clients see the connection drop and try to reconnect. It may be
// called more than once.
func (s *Server) Shutdown() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case <-s.done:
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
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
