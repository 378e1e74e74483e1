package faults_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// commitCutter is a TCP proxy in front of PostgreSQL that, once armed
// with a backend's pid, lets that backend's next COMMIT through to the
// server, reads the server's answer to
// it, and closes the connection instead of passing that answer on: a
// commit that landed while the client saw its connection die. It reads the
// wire protocol's message framing only (pgx sends COMMIT as a simple query,
// 'Q' "commit"); each connection's backend pid comes from the server's
// BackendKeyData message at start-up. Arming by pid, not "the next COMMIT
// on any connection", keeps another transaction of the receiver (a
// rejection sample, River's) from taking the cut.
type commitCutter struct {
	ln     net.Listener
	target string
	// armed is the pid of the backend whose next COMMIT is cut; 0: none.
	armed atomic.Int32
	// tags receives the command tag the server answered the cut COMMIT with.
	tags  chan string
	mu    sync.Mutex
	conns []net.Conn
}

// newCommitCutter starts a disarmed proxy in front of dbURL's server and
// returns it with the URL that reaches the database through it.
func newCommitCutter(t *testing.T, dbURL string) (*commitCutter, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &commitCutter{ln: ln, target: u.Host, tags: make(chan string, 1)}
	var wg sync.WaitGroup
	wg.Go(func() { p.serve(&wg) })
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	return p, u.String()
}

// arm makes the next COMMIT of backend pid the one cut.
func (p *commitCutter) arm(pid int32) { p.armed.Store(pid) }

func (p *commitCutter) serve(wg *sync.WaitGroup) {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		var (
			cut atomic.Bool
			pid atomic.Int32
		)
		wg.Go(func() { p.clientToServer(client, server, &cut, &pid) })
		wg.Go(func() { p.serverToClient(server, client, &cut, &pid) })
	}
}

// clientToServer forwards the startup packet, then message by message,
// setting cut before it forwards the armed COMMIT.
func (p *commitCutter) clientToServer(client, server net.Conn, cut *atomic.Bool, pid *atomic.Int32) {
	defer server.Close()
	var head [4]byte
	if _, err := io.ReadFull(client, head[:]); err != nil {
		return
	}
	startup := make([]byte, binary.BigEndian.Uint32(head[:])-4)
	if _, err := io.ReadFull(client, startup); err != nil {
		return
	}
	if _, err := server.Write(append(head[:], startup...)); err != nil {
		return
	}
	for {
		msg, err := readMessage(client)
		if err != nil {
			return
		}
		if msg[0] == 'Q' && bytes.EqualFold(bytes.TrimRight(msg[5:], "\x00"), []byte("commit")) &&
			pid.Load() != 0 && p.armed.CompareAndSwap(pid.Load(), 0) {
			cut.Store(true)
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// serverToClient forwards the server's messages, noting the backend's pid,
// until the cut: then it swallows the answer to the COMMIT, reports its tag
// and closes both ends.
func (p *commitCutter) serverToClient(server, client net.Conn, cut *atomic.Bool, pid *atomic.Int32) {
	defer client.Close()
	tag := ""
	for {
		msg, err := readMessage(server)
		if err != nil {
			return
		}
		if msg[0] == 'K' && len(msg) >= 9 { // BackendKeyData: pid, secret key
			pid.Store(int32(binary.BigEndian.Uint32(msg[5:9])))
		}
		if !cut.Load() {
			if _, err := client.Write(msg); err != nil {
				return
			}
			continue
		}
		switch msg[0] {
		case 'C':
			tag = string(bytes.TrimRight(msg[5:], "\x00"))
		case 'Z':
			p.tags <- tag
			server.Close()
			return
		}
	}
}

// readMessage reads one typed protocol message: type, length, body.
func readMessage(r io.Reader) ([]byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return nil, err
	}
	msg := make([]byte, 5+binary.BigEndian.Uint32(head[1:])-4)
	copy(msg, head[:])
	_, err := io.ReadFull(r, msg[5:])
	return msg, err
}
