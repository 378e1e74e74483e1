package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/outbox"
	"github.com/hookinbox/hookinbox/pkg/schema"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the ledger's own migration set, applied after the core's.
func Migrations() *schema.Set {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		panic(err) // the embedded folder is always there
	}
	return &schema.Set{Name: "ledger", FS: sub}
}

// deposit is the payload of an account.deposit event.
type deposit struct {
	Type string `json:"type"`
	Data struct {
		AccountID string `json:"account_id"`
		Amount    string `json:"amount"`
	} `json:"data"`
}

// amountRE accepts a positive decimal with at most two fractional digits
// that fits numeric(14, 2).
var amountRE = regexp.MustCompile(`^[0-9]{1,12}(\.[0-9]{1,2})?$`)

// Deposit applies an account.deposit event: it records a ledger entry,
// adds the amount to the account, creating the account if needed, and
// writes an account.credited message to the outbox for each of its route's
// destinations, all in the event's transaction. An entry that exists already (same source and event
// id) means the effect was applied, and nothing happens. A payload that does
// not describe a valid deposit is a permanent error: retrying cannot fix it.
func Deposit(ctx context.Context, tx pgx.Tx, ev inbox.Event) error {
	var d deposit
	if err := json.Unmarshal(ev.Payload, &d); err != nil {
		return inbox.Permanent(fmt.Errorf("ledger: payload: %w", err))
	}
	switch {
	case d.Data.AccountID == "":
		return inbox.Permanent(errors.New("ledger: data.account_id is missing"))
	case !amountRE.MatchString(d.Data.Amount):
		return inbox.Permanent(fmt.Errorf("ledger: data.amount %q is not a positive amount with at most 2 decimals", d.Data.Amount))
	}
	if _, err := tx.Exec(ctx,
		`INSERT INTO ledger_accounts (account_id, balance) VALUES ($1, 0) ON CONFLICT (account_id) DO NOTHING`,
		d.Data.AccountID); err != nil {
		return fmt.Errorf("ledger: create account: %w", err)
	}
	tag, err := tx.Exec(ctx, `
INSERT INTO ledger_entries (source, event_id, account_id, amount) VALUES ($1, $2, $3, $4::numeric)
ON CONFLICT (source, event_id) DO NOTHING`, ev.Source, ev.EventID, d.Data.AccountID, d.Data.Amount)
	if err != nil {
		return fmt.Errorf("ledger: record entry: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil // applied before: the second layer held
	}
	var balance string
	if err := tx.QueryRow(ctx,
		`UPDATE ledger_accounts SET balance = balance + $2::numeric WHERE account_id = $1 RETURNING balance::text`,
		d.Data.AccountID, d.Data.Amount).Scan(&balance); err != nil {
		return fmt.Errorf("ledger: credit account: %w", err)
	}
	return notify(ctx, tx, &ev, d.Data.AccountID, d.Data.Amount, balance)
}

// credited is the message the ledger sends when it credits an account.
type credited struct {
	Type      string `json:"type"`
	AccountID string `json:"account_id"`
	Amount    string `json:"amount"`
	Balance   string `json:"balance"`
	EventID   string `json:"event_id"`
}

// notify writes an "account.credited" message to the outbox, in the
// event's transaction, for each destination of the running route
// (worker.routes[].destinations): the inbox claim, the balance update and
// the message commit together or not at all, and the relay delivers the
// message afterwards, keyed "<source>:<event_id>:<destination>". A route
// without destinations sends nothing.
func notify(ctx context.Context, tx pgx.Tx, ev *inbox.Event, account, amount, balance string) error {
	route, ok := worker.RouteFrom(ctx)
	if !ok || len(route.Destinations) == 0 {
		return nil
	}
	payload, err := json.Marshal(credited{Type: "account.credited", AccountID: account, Amount: amount, Balance: balance, EventID: ev.EventID})
	if err != nil {
		return err
	}
	for _, dest := range route.Destinations {
		if _, err := outbox.Enqueue(ctx, tx, ev, outbox.Message{Destination: dest, Payload: payload}); err != nil {
			return fmt.Errorf("ledger: %w", err)
		}
	}
	return nil
}
