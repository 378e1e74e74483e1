package receiver

import (
	"cmp"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The defaults NewHTTPServer applies to a zero HTTPConfig field.
const (
	// MaxConnectionsDefault is HTTPConfig.MaxConnections's default.
	MaxConnectionsDefault = 2048
	// MaxHeaderBytesDefault is HTTPConfig.MaxHeaderBytes's default (32 KiB).
	MaxHeaderBytesDefault = 32 << 10
	// ReadHeaderTimeoutDefault is HTTPConfig.ReadHeaderTimeout's default.
	ReadHeaderTimeoutDefault = 5 * time.Second
	// IdleTimeoutDefault is HTTPConfig.IdleTimeout's default.
	IdleTimeoutDefault = 30 * time.Second
)

// HTTPConfig bounds what a connection may hold before a request reaches a
// handler.
type HTTPConfig struct {
	// MaxConnections caps the open connections. At the cap, a new
	// connection first replaces the one that has waited longest, and at
	// least a second, without a request in progress (idle between
	// keep-alive requests, or still sending its headers); when there is
	// none, the new one is answered 503 with Retry-After and closed.
	// Defaults to 2048.
	MaxConnections int
	// MaxHeaderBytes caps a request's header block; more gets 431.
	// Defaults to 32 KiB.
	MaxHeaderBytes int
	// ReadHeaderTimeout bounds the time a request's headers may take.
	// Defaults to 5s.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection this long after its last
	// answer. Defaults to 30s.
	IdleTimeout time.Duration
	// RetryAfter is sent with the 503 of a refused connection. Defaults to
	// 5s.
	RetryAfter time.Duration
	// Logger gets http.Server's own errors (sampled) and refused
	// connections. Defaults to a no-op logger.
	Logger *zap.Logger
}

// NewHTTPServer returns an http.Server serving h within config's limits,
// and ln wrapped to enforce MaxConnections: serve the server on the
// returned listener.
func NewHTTPServer(ln net.Listener, h http.Handler, config *HTTPConfig) (*http.Server, net.Listener) {
	c := *config
	c.MaxConnections = cmp.Or(c.MaxConnections, MaxConnectionsDefault)
	c.MaxHeaderBytes = cmp.Or(c.MaxHeaderBytes, MaxHeaderBytesDefault)
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
	body := `{"error":"too many connections; retry later"}` + "\n"
	limited := &connLimiter{
		Listener: ln,
		max:      c.MaxConnections,
		conns:    map[net.Conn]*connEntry{},
		refusal: []byte("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n" +
			"Retry-After: " + strconv.Itoa(max(1, int(c.RetryAfter.Round(time.Second)/time.Second))) + "\r\n" +
			"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body),
		logger: sampled,
	}
	srv := &http.Server{
		Handler:           h,
		MaxHeaderBytes:    c.MaxHeaderBytes,
		ReadHeaderTimeout: c.ReadHeaderTimeout,
		IdleTimeout:       c.IdleTimeout,
		ConnState:         limited.track,
		ErrorLog:          errorLog,
	}
	return srv, limited
}

// evictAfter is the least time a connection must have waited without a
// request in progress before it may be closed to make room: a provider's
// pooled keep-alive connection, idle for milliseconds between deliveries,
// is never closed under it as it sends.
const evictAfter = time.Second

// connLimiter is a listener that keeps at most max connections open.
type connLimiter struct {
	net.Listener
	max     int
	refusal []byte
	logger  *zap.Logger

	mu    sync.Mutex
	conns map[net.Conn]*connEntry
}

// connEntry is an open connection's state, as http.Server last reported it.
type connEntry struct {
	// waiting: no request in progress (new, or idle after an answer).
	waiting bool
	since   time.Time
}

// Accept accepts the next connection, making room for it when the cap is
// reached.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.admit(conn) {
			return conn, nil
		}
		l.refuse(conn)
	}
}

// admit counts conn in, closing the longest-waiting connection to make
// room at the cap, or reports false when every connection is busy.
func (l *connLimiter) admit(conn net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		var oldest net.Conn
		var since time.Time
		for c, e := range l.conns {
			if e.waiting && time.Since(e.since) >= evictAfter && (oldest == nil || e.since.Before(since)) {
				oldest, since = c, e.since
			}
		}
		if oldest == nil {
			return false
		}
		delete(l.conns, oldest)
		_ = oldest.Close()
	}
	l.conns[conn] = &connEntry{waiting: true, since: time.Now()}
	return true
}

// refuse answers a connection over the cap with 503 and closes it. The
// answer fits any socket buffer, so the write does not block.
func (l *connLimiter) refuse(conn net.Conn) {
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_, _ = conn.Write(l.refusal)
	_ = conn.Close()
	l.logger.Warn("connection refused", zap.Int("status", http.StatusServiceUnavailable),
		zap.String("detail", "receiver.max_connections connections all have a request in progress"), zap.Int("max_connections", l.max))
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
		delete(l.conns, conn)
	}
}
