package worker_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// commitLoser is a TCP proxy in front of PostgreSQL that can be cut (it
// closes every connection and turns new ones away) and armed: then the
// first answer to a COMMIT it sees is not forwarded, and the connection is
// closed instead. The transaction committed; its client sees an error.
type commitLoser struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	mu     sync.Mutex
	open   bool
	conns  []net.Conn
	wg     sync.WaitGroup
}

func newCommitLoser(t *testing.T, dbURL string) (*commitLoser, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &commitLoser{ln: ln, target: u.Host, open: true}
	p.wg.Go(p.serve)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	u.Host = ln.Addr().String()
	q := u.Query()
	q.Set("sslmode", "disable")
	u.RawQuery = q.Encode()
	return p, u.String()
}

func (p *commitLoser) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *commitLoser) reopen() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open = true
}

func (p *commitLoser) serve() {
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
		p.mu.Lock()
		if !p.open {
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
		p.wg.Go(func() { p.answers(c, up); c.Close(); up.Close() })
	}
}

// answers forwards the server's messages (type byte, int32 length, body)
// to the client, but for the answer to a COMMIT once armed.
func (p *commitLoser) answers(client, server net.Conn) {
	var head [5]byte
	for {
		if _, err := io.ReadFull(server, head[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(head[1:])-4)
		if _, err := io.ReadFull(server, body); err != nil {
			return
		}
		if head[0] == 'C' && bytes.Equal(body, []byte("COMMIT\x00")) && p.armed.CompareAndSwap(true, false) {
			return
		}
		if _, err := client.Write(append(head[:], body...)); err != nil {
			return
		}
	}
}

// lostCommitSetup returns a test bundle, a commitLoser in front of its
// database, the config of a worker whose one route runs a handler named
// for it that records its effect, and worker A, not started, with config(a)
// and its routes records kept through the commitLoser.
func lostCommitSetup(t *testing.T, a string) (*testBundle, *commitLoser, func(name string) *worker.Config, *worker.Worker) {
	t.Helper()
	b := setup(t)
	proxy, proxyURL := newCommitLoser(t, b.db.URL)
	regPool, err := pgxpool.New(context.Background(), proxyURL)
	require.NoError(t, err)
	t.Cleanup(regPool.Close)
	config := func(name string) *worker.Config {
		c := &worker.Config{Sources: sources, Registry: b.registry(t), Logger: zaptest.NewLogger(t), HeartbeatInterval: time.Second}
		c.Registry.Register(name, func(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects VALUES ($1)`, ev.EventID)
			return err
		})
		c.Routes = []worker.Route{{Source: "bank", Handlers: []string{name}}}
		return c
	}
	wa, err := worker.New(b.defaultsPool(t), config(a))
	require.NoError(t, err)
	wa.SetRegistrationPool(regPool)
	return b, proxy, config, wa
}

func TestAWorkerWhoseReclaimAnswerIsLostDoesNotWorkFencedForGood(t *testing.T) {
	t.Parallel()

	// Worker A is cut off from its records past their ttl; B, with other
	// routes, takes the queue over. When A reaches the database again its
	// renewal finds its records gone and it claims the queue again; the
	// claim finds B and commits, but its answer is lost (the connection
	// drops after the COMMIT). A must still leave StateWorking: a worker
	// that says working (ready) while it is fenced for good snoozes every
	// job it fetches and works nothing.
	ctx := context.Background()
	b, proxy, config, wa := lostCommitSetup(t, "rec_a")
	require.NoError(t, wa.Start(ctx))
	t.Cleanup(func() {
		proxy.reopen()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = wa.Stop(ctx)
	})
	require.Equal(t, worker.StateWorking, wa.State())

	proxy.cut()
	wb := runWorker(t, b.defaultsPool(t), config("rec_b"), nil)
	n := 0
	ingest := func(k int) {
		for range k {
			b.ingest(t, fmt.Sprintf("evt_%04d", n), "account.deposit")
			n++
		}
	}
	waitState(t, wb, worker.StateWorking)
	require.True(t, wa.Fenced())
	ingest(5)

	proxy.armed.Store(true)
	proxy.reopen()
	poll(t, 30*time.Second, "A's claim to commit with its answer lost", func() (bool, error) {
		return !proxy.armed.Load(), nil
	})
	// A claims again at its next renewal, a second later, and drains.
	ingest(5)
	poll(t, 10*time.Second, "A to leave StateWorking after its lost claim (a worker that says working, fenced for good, works nothing)",
		func() (bool, error) { return wa.State() != worker.StateWorking, nil })
	poll(t, 60*time.Second, "every event to be done", func() (bool, error) {
		c, err := b.store.Count(ctx, nil)
		return err == nil && c.Done == int64(n), err
	})
}

func TestAStartWhoseClaimAnswerIsLostKeepsItsRecordsStart(t *testing.T) {
	t.Parallel()

	// Worker A's first claim commits, but its answer is lost: Start fails,
	// and is called again, as the daemon does. Meanwhile B, with other
	// routes, started: it found A's record working, and waits. A's record
	// says A started first, so B is the newer route set, and the rollout
	// must go on: B works, A does not. An A that counted its start from
	// its second claim saw no newer route set waiting, and kept working;
	// B waited for good.
	ctx := context.Background()
	b, proxy, config, wa := lostCommitSetup(t, "start_a")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = wa.Stop(ctx)
	})
	proxy.armed.Store(true)
	require.Error(t, wa.Start(ctx), "A's claim, its answer lost")
	require.False(t, proxy.armed.Load(), "the lost answer was the claim's")

	wb := runWorker(t, b.defaultsPool(t), config("start_b"), nil)
	require.Equal(t, worker.StateWaiting, wb.State(), "B found A's record working")
	require.NoError(t, wa.Start(ctx))
	poll(t, 15*time.Second, "B, started after A, to take the queue over", func() (bool, error) {
		return wb.State() == worker.StateWorking, nil
	})
	require.NotEqual(t, worker.StateWorking, wa.State())
}
