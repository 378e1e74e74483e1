package receiver

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/hookinbox/hookinbox/pkg/component"
)

// The defaults NewHTTPServer applies to a zero HTTPConfig field set in
// code, pkg/component's.
const (
	// ReadHeaderTimeoutDefault is HTTPConfig.ReadHeaderTimeout's default.
	ReadHeaderTimeoutDefault = component.ReadHeaderTimeoutDefault
	// IdleTimeoutDefault is HTTPConfig.IdleTimeout's default.
	IdleTimeoutDefault = component.IdleTimeoutDefault
)

// HTTPConfig bounds what a connection may hold before a request reaches a
// handler, declared in pkg/component so that pkg/config names a public
// type.
type HTTPConfig = component.HTTPConfig

// NewHTTPServer returns an http.Server serving h within config's limits,
// and ln wrapped to enforce MaxConnections: serve the server on the
// returned listener.
func NewHTTPServer(ln net.Listener, h http.Handler, config *HTTPConfig) (*http.Server, net.Listener) {
	c := *config.WithDefaults()
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, IdleTimeoutDefault)
	c.RetryAfter = cmp.Or(c.RetryAfter, RetryAfterDefault)
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	// http.Server's own messages (a failed accept, a broken TLS
	// handshake) and refused connections go through zap, sampled by
	// message.
	sampled := c.Logger.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(core, rejectionLogInterval, rejectionLogBurst, 0)
	}))
	errorLog, _ := zap.NewStdLogAt(sampled, zapcore.WarnLevel)
	retryAfter := strconv.Itoa(max(1, int(c.RetryAfter.Round(time.Second)/time.Second)))
	limited := &connLimiter{
		Listener:       ln,
		max:            c.MaxConnections,
		maxPerClient:   c.MaxConnectionsPerClient,
		trustedProxies: c.TrustedProxies,
		conns:          map[net.Conn]*connEntry{},
		clients:        map[netip.Addr]int{},
		refusal:        refusal(retryAfter, "too many connections; retry later"),
		clientRefusal:  refusal(retryAfter, "too many connections from this address; retry later"),
		logger:         sampled,
	}
	srv := &http.Server{
		Handler:           h,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		ConnState:         limited.track,
		ConnContext:       limited.connContext,
		ErrorLog:          errorLog,
	}
	return srv, limited
}

// refusal is the canned 503 answer to a refused connection.
func refusal(retryAfter, msg string) []byte {
	body := `{"error":"` + msg + `"}` + "\n"
	return []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n" +
		"Retry-After: " + retryAfter + "\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
}

// evictAfter is the least time a connection must have waited without a
// request in progress before it may be closed to make room: a provider's
// pooled keep-alive connection, idle for milliseconds between deliveries,
// is never closed under it as it sends.
const evictAfter = time.Second

// connLimiter is a listener that keeps at most max connections open, and
// at most maxPerClient from one peer address outside trustedProxies.
type connLimiter struct {
	net.Listener
	max, maxPerClient int
	trustedProxies    []netip.Prefix
	refusal           []byte // at max
	clientRefusal     []byte // at maxPerClient
	logger            *zap.Logger

	mu      sync.Mutex
	conns   map[net.Conn]*connEntry
	clients map[netip.Addr]int // open connections per counted address
}

// connEntry is an open connection's state, as http.Server last reported it.
type connEntry struct {
	// addr is the peer address counted against maxPerClient; the zero
	// Addr for a trusted proxy's connection, which is not counted.
	addr netip.Addr
	// waiting: no request in progress (new, or idle after an answer).
	waiting bool
	since   time.Time
	// body is the request's unverified body while it is being read, or
	// nil (see attach).
	body atomic.Pointer[hold]
}

// connKey is the context key of a request's *connEntry.
type connKey struct{}

// connContext puts conn's entry in its requests' context, for attach.
func (l *connLimiter) connContext(ctx context.Context, conn net.Conn) context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e := l.conns[conn]; e != nil {
		return context.WithValue(ctx, connKey{}, e)
	}
	return ctx
}

// attach makes h known to the connection limiter that admitted its
// request's connection, if any, until the returned function is called:
// at a connection cap, the connection of the slowest unverified body may
// be closed to make room.
func attach(ctx context.Context, h *hold) (detach func()) {
	e, ok := ctx.Value(connKey{}).(*connEntry)
	if !ok {
		return func() {}
	}
	e.body.Store(h)
	return func() { e.body.CompareAndSwap(h, nil) }
}

// Accept accepts the next connection, making room for it when a cap is
// reached.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := l.counted(conn)
		switch l.admit(conn, addr) {
		case admitted:
			return conn, nil
		case clientFull:
			l.refuse(conn, l.clientRefusal, "client connection refused", zap.String("client_ip", addr.String()),
				zap.String("detail", "receiver.max_connections_per_client connections from this address all have a request in progress"),
				zap.Int("max_connections_per_client", l.maxPerClient))
		case full:
			l.refuse(conn, l.refusal, "connection refused",
				zap.String("detail", "receiver.max_connections connections all have a request in progress"), zap.Int("max_connections", l.max))
		}
	}
}

// counted is the address conn counts against maxPerClient under, or the
// zero Addr when it is not counted (a trusted proxy, or not TCP).
func (l *connLimiter) counted(conn net.Conn) netip.Addr {
	tcp, ok := conn.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	addr := tcp.AddrPort().Addr().Unmap()
	if allowed(addr, l.trustedProxies) {
		return netip.Addr{}
	}
	return addr
}

// admission is admit's verdict.
type admission int

const (
	admitted admission = iota
	clientFull
	full
)

// admit counts conn in, first closing the longest-waiting connection of
// addr when addr is at its cap, or of anyone when all are at the cap; it
// refuses when there is no such connection to close.
func (l *connLimiter) admit(conn net.Conn, addr netip.Addr) admission {
	l.mu.Lock()
	defer l.mu.Unlock()
	if addr.IsValid() && l.clients[addr] >= l.maxPerClient {
		if !l.evict(func(e *connEntry) bool { return e.addr == addr }) {
			return clientFull
		}
	}
	if len(l.conns) >= l.max && !l.evict(func(*connEntry) bool { return true }) {
		return full
	}
	l.conns[conn] = &connEntry{addr: addr, waiting: true, since: time.Now()}
	if addr.IsValid() {
		l.clients[addr]++
	}
	return admitted
}

// evict closes a connection among those that match to make room: the one
// whose unverified body is furthest behind min_body_rate's schedule
// (unverified.cutSlowest's choice), cutting the body first; else the one
// that has waited longest, and at least evictAfter, without a request in
// progress; else the one whose unverified body, ahead of the schedule, is
// cuttable after its grace. A body behind the schedule goes before an
// idle connection: a keep-alive connection a provider is about to reuse
// is worth more than a body arriving slower than the receiver accepts. It
// reports false when there is none.
func (l *connLimiter) evict(match func(*connEntry) bool) bool {
	var idle, slowest net.Conn
	var since time.Time
	var most float64
	now := time.Now()
	for c, e := range l.conns {
		if !match(e) {
			continue
		}
		if e.waiting && now.Sub(e.since) >= evictAfter && (idle == nil || e.since.Before(since)) {
			idle, since = c, e.since
		}
		if h := e.body.Load(); h != nil && h.cuttable(now) {
			if lag := h.lag(now); slowest == nil || lag > most {
				slowest, most = c, lag
			}
		}
	}
	var victim net.Conn
	switch {
	case slowest != nil && most > 0 && l.cutBody(slowest):
		victim = slowest
	case idle != nil:
		victim = idle
	case slowest != nil && l.cutBody(slowest):
		victim = slowest
	default:
		return false
	}
	l.remove(victim)
	_ = victim.Close()
	return true
}

// cutBody cuts the unverified body of conn's request, or reports false
// when it is no longer being read. The caller holds l.mu.
func (l *connLimiter) cutBody(conn net.Conn) bool {
	h := l.conns[conn].body.Load()
	if h == nil {
		return false
	}
	h.u.mu.Lock()
	defer h.u.mu.Unlock()
	return h.u.cut(h)
}

// remove forgets conn. The caller holds l.mu.
func (l *connLimiter) remove(conn net.Conn) {
	e := l.conns[conn]
	if e == nil {
		return
	}
	delete(l.conns, conn)
	if e.addr.IsValid() {
		if l.clients[e.addr]--; l.clients[e.addr] == 0 {
			delete(l.clients, e.addr)
		}
	}
}

// refuse answers a connection over a cap with 503 and closes it. The
// answer fits any socket buffer, so the write does not block.
func (l *connLimiter) refuse(conn net.Conn, answer []byte, msg string, fields ...zap.Field) {
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = conn.Write(answer)
	_ = conn.Close()
	l.logger.Warn(msg, append([]zap.Field{zap.Int("status", http.StatusServiceUnavailable)}, fields...)...)
}

// track follows http.Server's view of each connection.
func (l *connLimiter) track(conn net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.conns[conn]
	if e == nil {
		return // evicted
	}
	switch state {
	case http.StateNew, http.StateIdle:
		e.waiting, e.since = true, time.Now()
	case http.StateActive:
		e.waiting = false
	case http.StateHijacked, http.StateClosed:
		l.remove(conn)
	}
}
