package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// waitSettled polls until no event of this run is pending.
func waitSettled(ctx context.Context, pool *pgxpool.Pool, runID string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var pending int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE source = 'bank' AND event_id LIKE $1 || '%' AND status = 'pending'`, runID).Scan(&pending)
		if err != nil {
			return err
		}
		if pending == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d events still pending after 2 minutes", pending)
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
	var done, failed, entries int
	err := pool.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE status = 'done'), count(*) FILTER (WHERE status = 'failed')
FROM webhook_inbox WHERE source = 'bank' AND event_id LIKE $1 || '%'`, b.runID).Scan(&done, &failed)
	if err != nil {
		return false, err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM ledger_entries WHERE event_id LIKE $1 || '%'`, b.runID).Scan(&entries); err != nil {
		return false, err
	}
	fmt.Printf("   deliveries sent      %d\n", b.sent)
	fmt.Printf("   answered 200         %d\n", b.statuses[200])
	fmt.Printf("   answered 401         %d   (forged signature: nothing stored)\n", b.statuses[401])
	fmt.Printf("   other answers        %d\n", b.sent-b.statuses[200]-b.statuses[401])
	fmt.Printf("   new events           %d\n", b.new)
	fmt.Printf("   duplicates           %d\n", b.dupes)
	fmt.Printf("   done                 %d\n", done)
	fmt.Printf("   failed               %d\n", failed)
	rows, err := pool.Query(ctx, `SELECT event_id, last_error FROM webhook_inbox WHERE source = 'bank' AND event_id LIKE $1 || '%' AND status = 'failed' ORDER BY id`, b.runID)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var id, reason string
		if err := rows.Scan(&id, &reason); err != nil {
			return false, err
		}
		if len(reason) > 90 {
			reason = reason[:90] + "…"
		}
		fmt.Printf("     failed %-28s %s\n", id[len(b.runID)+1:], reason)
	}
	if err := rows.Err(); err != nil {
		return false, err
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
