package faults_test

import (
	"net"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// hangProxy is a TCP proxy in front of a PostgreSQL server that can hang:
// from then on it forwards nothing in either direction, keeping every
// connection open, and the connections it accepts later get nothing either.
// To its clients the server is neither down nor refusing: it just never
// answers, as behind a network partition that drops packets, or a server
// stuck on its storage. (Its kernel still acknowledges what they send, so a
// client's TCP keepalives and user timeout never fire: only the client's own
// timeouts can end the wait.) cut closes every connection, dropping what the
// proxy held.
type hangProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	hung   chan struct{} // closed by hang
	cutCh  chan struct{} // closed by cut
	once   [2]sync.Once
	conns  []net.Conn
	wg     sync.WaitGroup
}

// newHangProxy starts a proxy to target (host:port) and returns it; its
// address is addr().
func newHangProxy(t *testing.T, target string) *hangProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &hangProxy{ln: ln, target: target, hung: make(chan struct{}), cutCh: make(chan struct{})}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

// addr is the proxy's address, host:port.
func (p *hangProxy) addr() string { return p.ln.Addr().String() }

// hang stops all forwarding, for good.
func (p *hangProxy) hang() { p.once[0].Do(func() { close(p.hung) }) }

// cut closes every connection, with what the proxy held.
func (p *hangProxy) cut() {
	p.once[1].Do(func() {
		close(p.cutCh)
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
}

func (p *hangProxy) serve() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(client) {
			continue
		}
		p.wg.Go(func() {
			if p.isHung() { // a connection made while hung gets nothing
				<-p.cutCh
				client.Close()
				return
			}
			server, err := net.Dial("tcp", p.target)
			if err != nil {
				client.Close()
				return
			}
			if !p.track(server) {
				client.Close()
				return
			}
			var wg sync.WaitGroup
			wg.Go(func() { p.pipe(server, client) })
			wg.Go(func() { p.pipe(client, server) })
			wg.Wait()
		})
	}
}

// track adds c to the connections cut closes, or closes it and returns
// false when cut came first.
func (p *hangProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.cutCh:
		c.Close()
		return false
	default:
		p.conns = append(p.conns, c)
		return true
	}
}

// pipe copies src to dst until either closes or the proxy hangs: then it
// holds what it read, reads nothing more and passes on no end of stream,
// until cut.
func (p *hangProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.isHung() {
			<-p.cutCh
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// isHung reports whether hang was called.
func (p *hangProxy) isHung() bool {
	select {
	case <-p.hung:
		return true
	default:
		return false
	}
}
