package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/pkg/provider"
)

// feed is the demo's outbox destination: a user's service on loopback that
// receives the ledger's account.credited messages, verifies their Standard
// Webhooks signature, and deduplicates them by webhook-id, as the docs tell
// consumers to.
type feed struct {
	server   *http.Server
	url      string
	verifier provider.Verifier

	mu       sync.Mutex
	requests int
	bad      int
	seen     map[string]bool
}

func startFeed() (*feed, error) {
	v, err := provider.New("standardwebhooks", &provider.Config{Secrets: []string{secret}})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &feed{verifier: v, seen: map[string]bool{}, url: "http://" + ln.Addr().String() + "/credited"}
	f.server = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = f.server.Serve(ln) }()
	return f, nil
}

func (f *feed) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, err := f.verifier.Verify(body, r.Header)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests++
	if err != nil {
		f.bad++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	f.seen[r.Header.Get("webhook-id")] = true
}

func (f *feed) stop() { _ = f.server.Close() }

// waitFed polls until every outbox message of this run is delivered.
func waitFed(ctx context.Context, pool *pgxpool.Pool, runID string) error {
	deadline := time.Now().Add(time.Minute)
	for {
		var pending int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM hookinbox_outbox WHERE event_id LIKE $1 || '%' AND status <> 'delivered'`,
			runID).Scan(&pending); err != nil {
			return err
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d outbox %s still undelivered after a minute", pending, plural(int64(pending), "message", "messages"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// summarizeFeed prints what the feed received and reports whether it got
// exactly one message per ledger entry.
func summarizeFeed(ctx context.Context, pool *pgxpool.Pool, f *feed, runID string) (bool, error) {
	var entries, messages int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM ledger_entries WHERE event_id LIKE $1 || '%'),
       (SELECT count(*) FROM hookinbox_outbox WHERE event_id LIKE $1 || '%')`, runID).Scan(&entries, &messages); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	fmt.Printf("   outbox messages      %d   (one per ledger entry, written in its transaction)\n", messages)
	fmt.Printf("   feed requests        %d   (signed; %d failed verification)\n", f.requests, f.bad)
	fmt.Printf("   feed messages        %d   (after deduplication by webhook-id)\n", len(f.seen))
	ok := messages == entries && len(f.seen) == entries && f.bad == 0
	if ok {
		fmt.Println("   every credit reached the feed exactly once (effectively)")
	}
	return ok, nil
}
