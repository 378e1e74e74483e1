package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// waitSettled polls until no event of this run is pending.
func waitSettled(ctx context.Context, pool *pgxpool.Pool, runID string) error {
	store := inboxstore.New(pool)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := store.Count(ctx, &inboxstore.Filter{Source: "bank", EventIDPrefix: runID})
		if err != nil {
			return err
		}
		if c.Pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d %s still pending after 2 minutes", c.Pending, plural(c.Pending, "event", "events"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// summarize prints what happened and reports whether every balance matches
// the distinct deposits sent.
func summarize(ctx context.Context, pool *pgxpool.Pool, b *burst) (bool, error) {
	store := inboxstore.New(pool)
	run := &inboxstore.Filter{Source: "bank", EventIDPrefix: b.runID}
	c, err := store.Count(ctx, run)
	if err != nil {
		return false, err
	}
	var entries int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE event_id LIKE $1 || '%'`, b.runID).Scan(&entries); err != nil {
		return false, err
	}
	fmt.Printf("   deliveries sent      %d\n", b.sent)
	fmt.Printf("   answered 200         %d\n", b.statuses[200])
	fmt.Printf("   answered 401         %d   (forged signature: nothing stored)\n", b.statuses[401])
	fmt.Printf("   other answers        %d\n", b.sent-b.statuses[200]-b.statuses[401])
	fmt.Printf("   new events           %d\n", b.new)
	fmt.Printf("   duplicates           %d\n", b.dupes)
	fmt.Printf("   done                 %d\n", c.Done)
	fmt.Printf("   failed               %d\n", c.Failed)
	failures, err := store.ListFailed(ctx, run)
	if err != nil {
		return false, err
	}
	for _, f := range failures {
		reason := f.LastError
		if len(reason) > 90 {
			reason = reason[:90] + "…"
		}
		fmt.Printf("     failed %-28s %s\n", f.EventID[len(b.runID)+1:], reason)
	}
	fmt.Printf("   ledger entries       %d\n", entries)

	fmt.Println("   balances (account: ledger / expected from distinct deposits)")
	names := make([]string, 0, len(b.expected))
	for a := range b.expected {
		names = append(names, a)
	}
	sort.Strings(names)
	ok := true
	for _, a := range names {
		var balance string
		if err := pool.QueryRow(ctx, `SELECT balance::text FROM ledger_accounts WHERE account_id = $1`, a).Scan(&balance); err != nil {
			return false, err
		}
		want := fmt.Sprintf("%d.%02d", b.expected[a]/100, b.expected[a]%100)
		mark := "ok"
		if balance != want {
			mark, ok = "MISMATCH", false
		}
		fmt.Printf("     %-6s %12s / %12s  %s\n", a[len(b.runID)+1:], balance, want, mark)
	}
	if ok {
		fmt.Println("   every deposit was applied exactly once")
	}
	return ok, nil
}

// plural is one when n is 1, else many.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
