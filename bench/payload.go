package main

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/internal/webhook"
)

// The benchmark's source: a Standard Webhooks sender, as in the demo.
const (
	benchSource   = "bank"
	benchProvider = "standardwebhooks"
	benchSecret   = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" //nolint:gosec // G101: the demo's public test secret
	benchType     = "account.deposit"
	// benchAccounts spreads deposits over this many ledger accounts, so the
	// ledger drain measures the handler rather than one hot row.
	benchAccounts = 10_000
)

// depositBody returns a realistic account.deposit event of about 700 bytes:
// what a payment provider sends, with the nesting and metadata of a real
// event rather than a two-field toy. seq picks the amount and the account,
// one of as many as accounts says (benchAccounts when 0).
func depositBody(eventID string, seq int64, accounts int, at time.Time) []byte {
	account := seq % int64(cmp.Or(accounts, benchAccounts))
	cents := 100 + seq%99_900
	return fmt.Appendf(nil, `{"type":%q,"id":%q,"created_at":%q,"api_version":"2025-01-01",`+
		`"data":{"account_id":"acc_%06d","amount":"%d.%02d","currency":"EUR",`+
		`"reference":"dep_%s","description":"Card top-up at terminal T-%04d",`+
		`"customer":{"id":"cus_%08d","name":"Customer %d","email":"customer%d@example.com",`+
		`"address":{"line1":"%d Harbour Street","city":"Rotterdam","postal_code":"3011 AB","country":"NL"}},`+
		`"payment_method":{"type":"card","card":{"brand":"visa","last4":"%04d","exp_month":%d,"exp_year":2029,"funding":"debit"}},`+
		`"metadata":{"channel":"card_present","batch":"b_%06d","operator":"op_%03d","trace":"%016x"}}}`,
		benchType, eventID, at.UTC().Format(time.RFC3339), account, cents/100, cents%100,
		eventID, seq%1000, account, account, account, seq%500+1,
		seq%10_000, seq%12+1, seq/100, seq%100, uint64(seq)*0x9e3779b97f4a7c15)
}

// signedHeaders returns the headers a Standard Webhooks sender would send
// with body for eventID, signed now.
func signedHeaders(eventID string, body []byte, now time.Time) (http.Header, error) {
	return webhook.Headers(&webhook.Params{
		Provider: benchProvider, Secret: benchSecret, EventID: eventID, EventType: benchType, Time: now, Body: body,
	})
}

// newDelivery returns the delivery the receiver would hand the inbox for a
// signed delivery of eventID: the same event, payload, raw body and audit
// headers, so that the inbox makes the same row of it.
func newDelivery(eventID string, seq int64, accounts int, now time.Time) (*inboxstore.Delivery, error) {
	body := depositBody(eventID, seq, accounts, now)
	sig, err := sign.StandardWebhooks(benchSecret, eventID, now, body)
	if err != nil {
		return nil, err
	}
	return &inboxstore.Delivery{
		Source: benchSource, Provider: benchProvider, Body: body,
		Headers: map[string]string{
			"Webhook-Id":        eventID,
			"Webhook-Timestamp": strconv.FormatInt(now.Unix(), 10),
			"Webhook-Signature": sig,
		},
		Events: []inboxstore.IncomingEvent{{ID: eventID, Type: benchType, Payload: body}},
	}, nil
}
