package provider_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// A receiver builds one Verifier per source from its configuration, then
// hands it each request's raw body and headers.
func ExampleNew() {
	now := time.Unix(1492774577, 0)
	verifier, err := provider.New("stripe", &provider.Config{
		Secrets: []string{"whsec_old", "whsec_test_secret"}, // rotating: both accepted
		Now:     func() time.Time { return now },            // pinned for the example
	})
	if err != nil {
		panic(err)
	}

	body := []byte(`{"id":"evt_test_webhook","object":"event","type":"charge.succeeded"}`)
	header := http.Header{}
	header.Set("Stripe-Signature", sign.Stripe("whsec_test_secret", now, body))

	delivery, err := verifier.Verify(body, header)
	if err != nil {
		panic(err)
	}
	event := delivery.Events[0]
	fmt.Println(event.ID, event.Type, event.ParseError)

	_, err = verifier.Verify([]byte(`{"id":"evt_forged"}`), header)
	fmt.Println(errors.Is(err, provider.ErrSignatureInvalid))

	// Output:
	// evt_test_webhook charge.succeeded <nil>
	// true
}

// An authentic delivery whose body cannot be stored is not an error: its
// event carries a ParseError and is recorded as failed.
func ExampleVerifier_parseError() {
	verifier, err := provider.New("shopify", &provider.Config{Secrets: []string{"test_secret_key"}})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"note":"\u0000"}`)
	header := http.Header{}
	header.Set("X-Shopify-Hmac-Sha256", sign.Shopify("test_secret_key", body))
	header.Set("X-Shopify-Webhook-Id", "b54557e4-bdd9-4b37-8a5f-bf7d70bcd043")

	delivery, err := verifier.Verify(body, header)
	fmt.Println(err)
	fmt.Println(delivery.Events[0].ID)
	fmt.Println(delivery.Events[0].ParseError)

	// Output:
	// <nil>
	// b54557e4-bdd9-4b37-8a5f-bf7d70bcd043
	// body has \u0000 in a JSON string, which jsonb cannot store
}
