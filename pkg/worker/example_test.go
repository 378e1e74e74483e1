package worker_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// credit is a handler: it books a charge.succeeded event in a ledger table,
// through the event's transaction, so that the booking and the inbox row's
// done mark commit together or not at all. The insert is idempotent on the
// charge id, as every handler's writes should be: River may run an event
// again after a crash between the commit and the job's completion.
func credit(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
	var charge struct {
		Data struct {
			Object struct {
				ID     string `json:"id"`
				Amount int64  `json:"amount"`
			} `json:"object"`
		} `json:"data"`
	}
	// Retrying cannot fix a payload: fail such an event at once.
	if err := json.Unmarshal(ev.Payload, &charge); err != nil {
		return inbox.Permanent(fmt.Errorf("event %s: %w", ev.EventID, err))
	}
	if charge.Data.Object.ID == "" {
		return inbox.Permanent(fmt.Errorf("event %s: no data.object.id", ev.EventID))
	}
	_, err := tx.Exec(ctx, "INSERT INTO ledger (charge_id, amount) VALUES ($1, $2) ON CONFLICT (charge_id) DO NOTHING",
		charge.Data.Object.ID, charge.Data.Object.Amount)
	return err // a database error is retried with backoff
}

// printTx stands in for the event's transaction so that the example runs
// without PostgreSQL: it prints each statement instead of running it.
type printTx struct{ pgx.Tx }

func (printTx) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	fmt.Println("tx:", sql, args)
	return pgconn.NewCommandTag("INSERT 0 1"), nil
}

// A worker binary registers its handlers by name, and its routes send a
// source's events to them. For each event a route matches, the worker opens
// a transaction, locks the inbox row, runs the route's handlers in order with
// the row as an inbox.Event, marks the row done and completes the River job,
// and commits once. Here the handler is called as the worker calls it.
func Example() {
	registry := worker.NewRegistry(zap.NewNop())
	registry.Register("ledger", credit)
	fmt.Println(registry.Names()) // the built-ins and ours

	// The worker's configuration: Stripe's charge events go to "ledger".
	// In YAML: routes: [{source: stripe, types: ["charge.*"], handlers: [ledger]}]
	config := &worker.Config{
		Routes:   []worker.Route{{Source: "stripe", Types: []string{"charge.*"}, Handlers: []string{"ledger"}}},
		Registry: registry,
	}
	_ = config // worker.New(pool, config) runs it

	// What the handler receives: the inbox row, verified and deduplicated by
	// the receiver, its payload as the provider sent it.
	ev := inbox.Event{
		ID: 42, Source: "stripe", Provider: "stripe",
		EventID: "evt_1", EventType: "charge.succeeded",
		Payload: json.RawMessage(`{"id":"evt_1","type":"charge.succeeded","data":{"object":{"id":"ch_1","amount":1999}}}`),
	}
	fmt.Println(credit(context.Background(), printTx{}, ev))

	ev.EventID, ev.Payload = "evt_2", json.RawMessage(`{"id":"evt_2","type":"charge.succeeded","data":{}}`)
	err := credit(context.Background(), printTx{}, ev)
	fmt.Println(inbox.IsPermanent(err))

	// Output:
	// [forward ledger log mirror noop]
	// tx: INSERT INTO ledger (charge_id, amount) VALUES ($1, $2) ON CONFLICT (charge_id) DO NOTHING [ch_1 1999]
	// <nil>
	// true
}
