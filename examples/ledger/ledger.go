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
	"github.com/hookinbox/hookinbox/pkg/schema"
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

// Deposit applies an account.deposit event: it records a ledger entry and
// adds the amount to the account, creating the account if needed, in the
// event's transaction. An entry that exists already (same source and event
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
	if _, err := tx.Exec(ctx,
		`UPDATE ledger_accounts SET balance = balance + $2::numeric WHERE account_id = $1`,
		d.Data.AccountID, d.Data.Amount); err != nil {
		return fmt.Errorf("ledger: credit account: %w", err)
	}
	return nil
}
