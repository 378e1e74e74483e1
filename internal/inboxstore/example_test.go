package inboxstore_test

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// The receive flow, as the receiver runs it for each request: verify the raw
// body against the source's secrets, hand the authentic delivery to the
// inbox, and answer 2xx only once its events are claimed and their jobs
// enqueued, in one committed transaction. A resent delivery claims nothing
// and enqueues nothing: it counts as a duplicate and is answered 2xx too.
//
// It needs PostgreSQL with the core and River migrations applied
// (inboxctl migrate), so it is compiled but not run.
func Example_receive() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	riverClient, err := river.NewClient(riverpgxv5.New(pool), &river.Config{}) // insert-only
	if err != nil {
		panic(err)
	}
	ingester := inboxstore.NewIngester(pool, riverClient, &inboxstore.IngesterConfig{})
	verifier, err := provider.New("stripe", &provider.Config{Secrets: []string{os.Getenv("STRIPE_WEBHOOK_SECRET")}})
	if err != nil {
		panic(err)
	}

	receive := func(body []byte, header http.Header) int {
		delivery, err := verifier.Verify(body, header)
		if err != nil {
			return http.StatusUnauthorized // nothing is written
		}
		in := &inboxstore.Delivery{Source: "stripe", Provider: "stripe", Body: body, Headers: delivery.Headers}
		for _, ev := range delivery.Events {
			in.Events = append(in.Events, inboxstore.IncomingEvent{
				ID: ev.ID, Type: ev.Type, Payload: ev.Payload, TwinKey: ev.TwinKey, ParseError: ev.ParseError,
			})
		}
		result, err := ingester.Ingest(ctx, in)
		if err != nil {
			return http.StatusServiceUnavailable // the provider retries
		}
		fmt.Printf("new %d, duplicates %d\n", result.New, result.Duplicates)
		return http.StatusOK
	}

	body := []byte(`{"id":"evt_1","object":"event","type":"charge.succeeded"}`)
	header := http.Header{"Stripe-Signature": {"t=…,v1=…"}} // as the request carried it
	fmt.Println(receive(body, header))
	fmt.Println(receive(body, header)) // Stripe resends: new 0, duplicates 1
}
