package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

func ledgerDB(t *testing.T) *dbtest.DB {
	t.Helper()
	return dbtest.New(t, schema.Core(), Migrations())
}

func applyInTx(t *testing.T, db *dbtest.DB, ev inbox.Event) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), db.Pool, func(tx pgx.Tx) error {
		return Deposit(context.Background(), tx, ev)
	})
}

func balance(t *testing.T, db *dbtest.DB, account string) string {
	t.Helper()
	var b string
	require.NoError(t, db.Pool.QueryRow(context.Background(),
		`SELECT balance::text FROM ledger_accounts WHERE account_id = $1`, account).Scan(&b))
	return b
}

func depositEvent(id, payload string) inbox.Event {
	return inbox.Event{Source: "bank", EventID: id, EventType: "account.deposit", Payload: []byte(payload)}
}

func TestDeposit(t *testing.T) {
	t.Parallel()

	t.Run("CreatesTheAccountAndCreditsIt", func(t *testing.T) {
		t.Parallel()
		db := ledgerDB(t)
		require.NoError(t, applyInTx(t, db, depositEvent("e1", `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"12.34"}}`)))
		require.NoError(t, applyInTx(t, db, depositEvent("e2", `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"0.66"}}`)))
		require.Equal(t, "13.00", balance(t, db, "acc_1"))
	})

	t.Run("SameEventTwiceIsAppliedOnce", func(t *testing.T) {
		t.Parallel()
		db := ledgerDB(t)
		ev := depositEvent("e1", `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"5"}}`)
		require.NoError(t, applyInTx(t, db, ev))
		require.NoError(t, applyInTx(t, db, ev))
		require.Equal(t, "5.00", balance(t, db, "acc_1"))
	})

	t.Run("InvalidDepositsArePermanentErrors", func(t *testing.T) {
		t.Parallel()
		db := ledgerDB(t)
		for _, payload := range []string{
			`not json`,
			`{"type":"account.deposit","data":{"amount":"1.00"}}`,
			`{"type":"account.deposit","data":{"account_id":"a","amount":"twelve"}}`,
			`{"type":"account.deposit","data":{"account_id":"a","amount":"-1.00"}}`,
			`{"type":"account.deposit","data":{"account_id":"a","amount":"1.001"}}`,
			`{"type":"account.deposit","data":{"account_id":"a","amount":"1234567890123"}}`,
		} {
			err := applyInTx(t, db, depositEvent("e", payload))
			require.Error(t, err, payload)
			require.True(t, inbox.IsPermanent(err), payload)
			var pe *inbox.PermanentError
			require.ErrorAs(t, err, &pe)
		}
	})
}
