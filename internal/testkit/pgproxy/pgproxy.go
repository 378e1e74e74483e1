// Package pgproxy is a TCP proxy in front of a PostgreSQL server that a
// test opens and cuts, so that the database arrives, and goes away, when
// the test says: a daemon reaches its database through it.
package pgproxy

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Proxy forwards connections to one PostgreSQL server while it is open.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup
	mu     sync.Mutex
	opened bool       // under mu
	conns  []net.Conn // under mu: the connections forwarded since the last cut
}

// New starts a closed proxy in front of dbURL's server and returns it with
// the URL that reaches the database through it. The test's cleanup stops
// it.
func New(t testing.TB, dbURL string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &Proxy{ln: ln, target: u.Host}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
		p.wg.Wait()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

// Open forwards every later connection to the server.
func (p *Proxy) Open() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opened = true
}

// Cut closes every connection it forwards and turns every later one away
// (accepted, then closed at once) until Open: the server is gone, as in a
// crash or a failover, seen from the client.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.opened = false
	p.closeAll()
}

// closeAll closes the forwarded connections; p.mu is held.
func (p *Proxy) closeAll() {
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		// Checked with the append, so that a Cut closes every connection
		// forwarded before it.
		p.mu.Lock()
		if !p.opened {
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
		p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
	}
}
