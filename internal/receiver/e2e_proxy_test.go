package receiver_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookinbox/hookinbox/internal/receiver"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

const servedSecret = "whsec_served"

// servedBundle is a receiver built from config as cmd/receiver builds it
// and served as it serves it: behind NewHTTPServer's connection caps, on a
// loopback port, on a database of the test's own.
type servedBundle struct {
	db   *dbtest.DB
	srv  *receiver.Server
	addr string // host:port
	logs *observer.ObservedLogs
}

// setupServed starts a receiver with one Stripe source ("stripe", signed
// with servedSecret, a minute's ack timeout) and the receiver: section
// mutate sets.
func setupServed(t *testing.T, mutate func(*config.ReceiverConfig)) *servedBundle {
	t.Helper()
	db := dbtest.New(t)
	cfg := &config.Config{
		Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
		Sources:  []config.SourceConfig{{Name: "stripe", Provider: "stripe", Secrets: []config.Secret{servedSecret}, AckTimeout: time.Minute}},
	}
	mutate(&cfg.Receiver)
	cfg.ApplyDefaults()
	core, logs := observer.New(zapcore.InfoLevel)
	env := &daemon.Env{Config: cfg, Logger: zap.New(core), Pool: db.Pool}
	r, stop, err := daemon.NewReceiver(env)
	require.NoError(t, err)
	t.Cleanup(stop) // after the server's shutdown below: cleanups run last-in, first-out
	srv := receiver.ServerOf(r.Handler())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	hc := srv.HTTPConfig() // the connection limits and the parsed trusted_proxies
	hc.Logger = env.Logger
	hs, limited := receiver.NewHTTPServer(ln, srv.Handler(), hc)
	served := make(chan error, 1)
	go func() { served <- hs.Serve(limited) }()
	t.Cleanup(func() {
		require.NoError(t, hs.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
	})
	return &servedBundle{db: db, srv: srv, addr: ln.Addr().String(), logs: logs}
}

// refusals returns the client_ip and request_id of each delivery refused
// for reason.
func (b *servedBundle) refusals(reason string) [][2]string {
	var out [][2]string
	for _, e := range b.logs.FilterMessage("delivery").FilterField(zap.String("reason", reason)).All() {
		out = append(out, [2]string{e.ContextMap()["client_ip"].(string), e.ContextMap()["request_id"].(string)})
	}
	return out
}

// waitUnverified waits until the client address addr has n requests in
// the unverified phase that have received at least received body bytes.
func (b *servedBundle) waitUnverified(t *testing.T, addr string, n int, received int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		got, bytes := b.srv.Unverified(addr)
		return got == n && bytes >= received
	}, 10*time.Second, 5*time.Millisecond, "%d requests from %s in the unverified phase, %d bytes received", n, addr, received)
}

// delivery is a signed Stripe delivery of the event id.
func delivery(t *testing.T, id string) (http.Header, []byte) {
	t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid","data":{"object":{"id":"in_%s"}}}`, id, id))
	return stripeDelivery(t, servedSecret, body), body
}

// sendFrom posts a signed delivery of the event id to url, from the
// loopback address from, on a connection of its own, and returns the
// answer's status.
func sendFrom(from, url, id string, header http.Header, body []byte) (int, error) {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: dialer.DialContext, DisableKeepAlives: true}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodPost, url+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", id, err)
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// slowBody opens a connection from the loopback address from to addr and
// sends a POST of a size-byte body with the request id id, of which it
// sends only the first sent bytes; the rest is never sent.
func slowBody(t *testing.T, addr, from, id string, size, sent int) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_, err = fmt.Fprintf(conn, "POST /webhooks/stripe HTTP/1.1\r\nHost: hooks\r\nX-Request-Id: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		id, size, strings.Repeat("x", sent))
	require.NoError(t, err)
	return conn
}

// answerOn reads conn's answer within wait: its status, or 0 and the error
// when none came (a deadline error when the request is still pending).
func answerOn(conn net.Conn, wait time.Duration) (int, error) {
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// pending asserts that conn's request has no answer yet.
func pending(t *testing.T, conn net.Conn) {
	t.Helper()
	status, err := answerOn(conn, 50*time.Millisecond)
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, "want no answer yet, got %d", status)
}

// proxyFrom is the address the reverse proxy's connections to the
// receiver come from: the one trusted proxy.
const proxyFrom = "127.0.0.3"

// reverseProxy serves an httputil.ReverseProxy to the receiver at addr on
// a loopback port and returns its URL. Like an ingress controller, it
// streams bodies (no buffering) and appends the client's address to
// X-Forwarded-For; its connections to the receiver come from proxyFrom.
func reverseProxy(t *testing.T, addr string) string {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: addr}
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(proxyFrom)}}
	transport := &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 256}
	ps := httptest.NewServer(&httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.SetXForwarded()
		},
		Transport: transport,
		// The stalled bodies' copies fail when the test ends.
		ErrorLog: log.New(io.Discard, "", 0),
	})
	t.Cleanup(func() {
		ps.CloseClientConnections()
		ps.Close()
		transport.CloseIdleConnections()
	})
	return ps.URL
}

// TestBehindAReverseProxy puts a real reverse proxy (httputil, streaming
// like an ingress) in front of the receiver, whose trusted_proxies is the
// proxy's address. 200 legit deliveries at once, from 200 client
// addresses, all get 2xx through it; and max_unverified_per_client still
// applies to each original client address, never to the proxy's: a
// client at its limit with bodies arriving at a good pace gets its next
// request refused (503), one at its limit with stalled bodies has its own
// slowest cut to make room, and neither touches the others.
func TestBehindAReverseProxy(t *testing.T) {
	t.Parallel()
	const perClient = 4
	b := setupServed(t, func(r *config.ReceiverConfig) {
		r.TrustedProxies = []string{proxyFrom}
		r.MaxUnverifiedPerClient = perClient
		// Stalled bodies stay in the unverified phase for the whole test.
		r.BodyGrace = time.Minute
	})
	proxy := reverseProxy(t, b.addr)
	proxyAddr := strings.TrimPrefix(proxy, "http://")

	// Client A (127.0.2.1) has perClient bodies in, all but their last
	// byte received: ahead of min_body_rate's schedule for a minute.
	// Client B (127.0.2.2) has perClient bodies of which nothing came.
	const size = 1_000_000
	const clientA, clientB = "127.0.2.1", "127.0.2.2"
	for i := range perClient {
		slowBody(t, proxyAddr, clientA, fmt.Sprintf("a-%d", i), size, size-1)
	}
	b.waitUnverified(t, clientA, perClient, perClient*(size-8<<10)) // the proxy may still buffer a write's worth
	for i := range perClient {
		slowBody(t, proxyAddr, clientB, fmt.Sprintf("b-%d", i), size, 0)
		b.waitUnverified(t, clientB, i+1, 0) // one after another: their ages differ
	}

	// 200 legit deliveries at once, each from an address of its own.
	const legit = 200
	statuses := make([]int, legit)
	errs := make([]error, legit)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range legit {
		header, body := delivery(t, fmt.Sprintf("evt_legit_%d", i))
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i], errs[i] = sendFrom(fmt.Sprintf("127.0.1.%d", i+1), proxy, fmt.Sprintf("evt_legit_%d", i), header, body)
		}()
	}
	close(start)
	wg.Wait()
	ok := 0
	for i := range legit {
		require.NoError(t, errs[i])
		if statuses[i]/100 == 2 {
			ok++
		}
	}
	t.Logf("through the proxy: %d/%d legit deliveries answered 2xx", ok, legit)
	require.Equal(t, legit, ok, "statuses %v", statuses)

	// A and B still have their bodies in: the 200 took nothing of theirs.
	a, _ := b.srv.Unverified(clientA)
	require.Equal(t, perClient, a)
	bs, _ := b.srv.Unverified(clientB)
	require.Equal(t, perClient, bs)

	// A's next request is over its limit, and none of A's bodies is slow:
	// refused.
	header, body := delivery(t, "evt_a")
	status, err := sendFrom(clientA, proxy, "evt_a", header, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusServiceUnavailable, status)

	// B's next request is over its limit too, but B's oldest stalled body
	// is the slowest: it is cut (the receiver answers it 503; httputil's
	// proxy cannot relay that answer while its copy of the body waits on
	// the client, so the receiver's log is asserted) and the new one is
	// stored.
	header, body = delivery(t, "evt_b")
	status, err = sendFrom(clientB, proxy, "evt_b", header, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
	bs, _ = b.srv.Unverified(clientB)
	require.Equal(t, perClient-1, bs)

	// Each refusal names the original client, never the proxy.
	busy := b.refusals("client_busy")
	require.Len(t, busy, 1)
	require.Equal(t, clientA, busy[0][0])
	require.Equal(t, [][2]string{{clientB, "b-0"}}, b.refusals("slowest_cut"))
	rows, _ := rowCounts(t, b.db)
	require.Equal(t, legit+1, rows)
}
