package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/hookinbox/hookinbox/pkg/provider"
)

// stripeSignature computes a Stripe-Signature header value the way Stripe
// does: "t=<unix time>,v1=<hex HMAC-SHA256 of "<unix time>.<body>">".
func stripeSignature(secret string, t time.Time, body []byte) string {
	timestamp := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "."))
	mac.Write(body)
	return "t=" + timestamp + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

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
	header.Set("Stripe-Signature", stripeSignature("whsec_test_secret", now, body))

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

// A signed timestamp bounds how long a captured delivery can be replayed:
// the same request, authentic when it was sent, is refused once it is older
// than Config.Tolerance (5 minutes by default).
func ExampleVerifier_stripeTolerance() {
	sent := time.Unix(1700000000, 0)
	now := sent
	verifier, err := provider.New("stripe", &provider.Config{
		Secrets: []string{"whsec_test_secret"},
		Now:     func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"id":"evt_1","object":"event","type":"invoice.paid"}`)
	header := http.Header{"Stripe-Signature": {stripeSignature("whsec_test_secret", sent, body)}}

	_, err = verifier.Verify(body, header)
	fmt.Println(err)

	now = sent.Add(6 * time.Minute)
	_, err = verifier.Verify(body, header)
	fmt.Println(errors.Is(err, provider.ErrTimestampOutsideTolerance))

	_, err = verifier.Verify(body, http.Header{})
	fmt.Println(errors.Is(err, provider.ErrSignatureMissing))

	// Output:
	// <nil>
	// true
	// true
}

// GitHub signs the raw body with HMAC-SHA256 and sends it as
// X-Hub-Signature-256: "sha256=<hex>" (the secret and body are the test
// vector of GitHub's documentation). The event's id and type come from the
// X-GitHub-Delivery and X-GitHub-Event headers.
func ExampleNew_github() {
	verifier, err := provider.New("github", &provider.Config{Secrets: []string{"It's a Secret to Everybody"}})
	if err != nil {
		panic(err)
	}
	body := []byte("Hello, World!")
	mac := hmac.New(sha256.New, []byte("It's a Secret to Everybody"))
	mac.Write(body)
	header := http.Header{}
	header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	header.Set("X-GitHub-Event", "ping")

	delivery, err := verifier.Verify(body, header)
	if err != nil {
		panic(err)
	}
	fmt.Println(header.Get("X-Hub-Signature-256"))
	fmt.Println(delivery.Events[0].ID, delivery.Events[0].Type)
	fmt.Println(delivery.Events[0].ParseError) // authentic, but not JSON: recorded as failed

	// Output:
	// sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17
	// 72d3162e-cc78-11e3-81ab-4c9367dc0958 ping
	// body is not JSON: invalid character 'H' looking for beginning of value
}

// An authentic delivery whose body cannot be stored is not an error: its
// event carries a ParseError and is recorded as failed.
func ExampleVerifier_parseError() {
	verifier, err := provider.New("shopify", &provider.Config{Secrets: []string{"test_secret_key"}})
	if err != nil {
		panic(err)
	}
	body := []byte(`{"note":"\u0000"}`)
	mac := hmac.New(sha256.New, []byte("test_secret_key"))
	mac.Write(body)
	header := http.Header{}
	header.Set("X-Shopify-Hmac-Sha256", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
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
