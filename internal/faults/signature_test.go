package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// sigCase is a provider whose signatures scenario 6 attacks.
type sigCase struct {
	provider, secret, header string
}

// sigCases sign in hex (stripe, github), in base64 with and without a
// version prefix (standardwebhooks, shopify).
var sigCases = []sigCase{
	{"stripe", "whsec_stripe_faults", "Stripe-Signature"},
	{"standardwebhooks", secret, "Webhook-Signature"},
	{"github", "github_faults", "X-Hub-Signature-256"},
	{"shopify", "shopify_faults", "X-Shopify-Hmac-Sha256"},
}

// TestSignatureAttacks is scenario 6, on the verifiers the receiver runs:
// every single-bit flip of a valid signature header (the unused low bits of
// its last base64 character included) and of its body is rejected; a
// replay signed outside the tolerance is rejected; a v0 or other
// downgraded scheme is ignored. The comparison's constant time is not
// measured (a timing test on 2 shared cores would be noise or a flake): by
// code review, every MAC is compared with hmac.Equal (pkg/provider's
// keyring.matches, its Basic Auth check) and the admin token with
// subtle.ConstantTimeCompare.
func TestSignatureAttacks(t *testing.T) {
	t.Parallel()
	row := record(t, "6 signature attacks")
	now := time.Unix(1_780_000_000, 0)
	body := []byte(`{"id":"evt_faults_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":1234}}}`)
	flips, rejected := 0, 0
	for _, tc := range sigCases {
		v, err := provider.New(tc.provider, &provider.Config{Secrets: []string{tc.secret}, Now: func() time.Time { return now }})
		require.NoError(t, err)
		signed, err := webhook.Sign(&webhook.Params{Provider: tc.provider, Secret: tc.secret, EventID: "evt_faults_1",
			EventType: "payment_intent.succeeded", Time: now, Body: body})
		require.NoError(t, err)
		_, err = v.Verify(signed.Body, signed.Header)
		require.NoError(t, err, "%s: the valid delivery", tc.provider)
		sig := signed.Header.Get(tc.header)
		require.NotEmpty(t, sig, tc.provider)

		for i := range len(sig) * 8 {
			h := signed.Header.Clone()
			h.Set(tc.header, string(flip([]byte(sig), i)))
			_, err := v.Verify(signed.Body, h)
			flips++
			if err != nil {
				rejected++
			}
			require.Error(t, err, "%s: bit %d of the signature %q flipped: %q accepted", tc.provider, i, sig, h.Get(tc.header))
		}
		for i := range len(signed.Body) * 8 {
			_, err := v.Verify(flip(signed.Body, i), signed.Header)
			flips++
			if err != nil {
				rejected++
			}
			require.Error(t, err, "%s: bit %d of the body flipped, accepted", tc.provider, i)
		}
	}

	// Replays outside the 5-minute tolerance, both ways, are rejected.
	for _, tc := range sigCases[:2] {
		v, err := provider.New(tc.provider, &provider.Config{Secrets: []string{tc.secret}, Now: func() time.Time { return now }})
		require.NoError(t, err)
		for _, skew := range []time.Duration{-5*time.Minute - time.Second, 5*time.Minute + time.Second, -24 * time.Hour} {
			signed, err := webhook.Sign(&webhook.Params{Provider: tc.provider, Secret: tc.secret, EventID: "evt_faults_1",
				EventType: "payment_intent.succeeded", Time: now.Add(skew), Body: body})
			require.NoError(t, err)
			_, err = v.Verify(signed.Body, signed.Header)
			require.ErrorIs(t, err, provider.ErrTimestampOutsideTolerance, "%s: signed %s from now", tc.provider, skew)
		}
	}

	// Downgrades: the right MAC under another scheme version is not
	// accepted, and another version beside a valid v1 is ignored.
	stripe, err := provider.New("stripe", &provider.Config{Secrets: []string{sigCases[0].secret}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	v1 := sign.Stripe(sigCases[0].secret, now, body) // t=…,v1=…
	ts, mac, _ := strings.Cut(v1, ",v1=")
	for _, header := range []string{ts + ",v0=" + mac, ts + ",V1=" + mac, ts + ",v2=" + mac, ts + ",v1=" + strings.ToUpper(mac), "v1=" + mac} {
		_, err := stripe.Verify(body, http.Header{"Stripe-Signature": {header}})
		require.Error(t, err, "stripe: %q accepted", header)
	}
	_, err = stripe.Verify(body, http.Header{"Stripe-Signature": {ts + ",v0=" + strings.Repeat("0", 64) + ",v1=" + mac}})
	require.NoError(t, err, "a v0 entry beside a valid v1 is ignored")
	sw, err := provider.New("standardwebhooks", &provider.Config{Secrets: []string{secret}, Now: func() time.Time { return now }})
	require.NoError(t, err)
	signed, err := webhook.Sign(&webhook.Params{Provider: "standardwebhooks", Secret: secret, EventID: "evt_faults_1",
		EventType: "payment_intent.succeeded", Time: now, Body: body})
	require.NoError(t, err)
	b64 := strings.TrimPrefix(signed.Header.Get("Webhook-Signature"), "v1,")
	for _, header := range []string{"v0," + b64, "v1a," + b64, "v2," + b64, "V1," + b64, "v1" + b64} {
		h := signed.Header.Clone()
		h.Set("Webhook-Signature", header)
		_, err := sw.Verify(body, h)
		require.Error(t, err, "standardwebhooks: %q accepted", header)
	}
	h := signed.Header.Clone()
	h.Set("Webhook-Signature", "v0,"+b64+" v1,"+b64)
	_, err = sw.Verify(body, h)
	require.NoError(t, err, "a v0 entry beside a valid v1 is ignored")

	row.Offered, row.Acked = flips, flips-rejected
	row.Note = fmt.Sprintf("%d single-bit flips (signatures, bodies) over %d providers, all rejected; replays and downgrades rejected", flips, len(sigCases))
}

// flip returns a copy of b with bit i flipped.
func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i/8] ^= 1 << (i % 8)
	return c
}

// TestSourceParameter is the rest of scenario 6: the path parameter
// source, whatever it holds, is looked up among the configured sources and
// reaches neither SQL nor the file system: hostile names get 404, nothing is
// written, and the receiver keeps serving.
func TestSourceParameter(t *testing.T) {
	t.Parallel()
	row := record(t, "6 source path parameter")
	// Offered: hostile requests; acked: those answered 2xx (none may be).
	db := ledgerDB(t)
	receiver, target := startReceiver(t, setup{DB: db.URL}.write(t))
	base := strings.TrimSuffix(target, "bank")
	hostile := []string{"bank'--", "bank';DROP TABLE webhook_inbox;--", "../../../../etc/passwd", "..%2F..%2Fetc%2Fpasswd",
		"%2e%2e%2f%2e%2e%2fetc", "bank%00", "bank%20", "BANK", "bank\\..", "$(id)", strings.Repeat("a", 4000), "%27%3B%20SELECT%20pg_sleep(10)"}
	d := faults.Deposit{ID: "src_1", Account: "acc_0", Cents: 100}
	for _, name := range hostile {
		u := base + url.PathEscape(name)
		if strings.Contains(name, "%") {
			u = base + name // already escaped: sent as the attacker spells it
		}
		req, err := faults.Sign(context.Background(), u, secret, &d, time.Now())
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, name)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode, "source %q", name)
		row.Offered++
	}
	var rows int
	require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_inbox`).Scan(&rows))
	require.Zero(t, rows, "rows written by hostile sources")
	// The receiver still serves, and a flipped bit over HTTP is a 401.
	bad, err := faults.Sign(context.Background(), target, secret, &d, time.Now())
	require.NoError(t, err)
	sig := []byte(bad.Header.Get("Webhook-Signature"))
	sig[10] ^= 1 // a base64 letter for another: one bit, still a valid header
	bad.Header.Set("Webhook-Signature", string(sig))
	resp, err := http.DefaultClient.Do(bad)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Equal(t, http.StatusOK, post(t, target, &d))
	receiver.RequireRunning(t)
	row.Note = fmt.Sprintf("%d hostile source names answered 404, nothing written; the receiver kept serving", len(hostile))
}
