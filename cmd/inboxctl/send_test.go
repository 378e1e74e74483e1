package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// sendSources configures one source of every provider, with every
// credential the provider can check, and a second source where a provider
// has a second way of delivering (marqeta without HMAC, a twilio form, an
// hmac source keyed from the body).
const sendSources = `
sources:
  - {name: stripe, provider: stripe, secrets: [whsec_send_test_stripe]}
  - {name: shopify, provider: shopify, secrets: [shopify_app_secret]}
  - {name: standardwebhooks, provider: standardwebhooks, secrets: ["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"]}
  - {name: svix, provider: svix, secrets: ["whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"]}
  - {name: github, provider: github, secrets: [github webhook secret]}
  - {name: square, provider: square, secrets: [square-signature-key], url: "https://hooks.example.com/webhooks/square"}
  - {name: paddle, provider: paddle, secrets: [pdl_ntfset_01send_secret]}
  - {name: slack, provider: slack, secrets: [slack-signing-secret]}
  - name: marqeta
    provider: marqeta
    secrets: [marqeta-hmac-secret]
    algorithm: sha1
    basic_auth: [{username: hookinbox, password: marqeta-password}]
  - name: marqeta_basic
    provider: marqeta
    basic_auth: [{username: hookinbox, password: marqeta-password}]
  - name: adyen
    provider: adyen
    secrets: ["44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"]
    basic_auth: [{username: hookinbox, password: adyen-password}]
  - {name: twilio, provider: twilio, secrets: [twilio-auth-token], url: "https://hooks.example.com/webhooks/twilio?tenant=1"}
  - {name: twilio_form, provider: twilio, secrets: [twilio-auth-token], url: "https://hooks.example.com/webhooks/twilio_form"}
  - name: hmac
    provider: hmac
    secrets: [hmac-secret]
    algorithm: sha512
    basic_auth: [{username: hookinbox, password: hmac-password}]
    hmac:
      header: X-Signature
      prefix: "v1="
      encoding: base64
      template: "{timestamp}.{id}.{body}"
      timestamp_header: X-Timestamp
      id_header: X-Event-Id
      type_header: X-Event-Type
      api_key_header: X-Api-Key
      api_keys: [hmac-api-key]
  - name: hmac_path
    provider: hmac
    secrets: [hmac-secret]
    hmac: {header: X-Hub-Signature-256, prefix: "sha256=", id_path: data.id, type_path: type}
`

// writeSendConfig writes a config file of sendSources on databaseURL.
func writeSendConfig(t *testing.T, databaseURL string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	yaml := fmt.Sprintf("database: {url: %q}\nlog: {level: warn}\n", databaseURL) + sendSources
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

// runSend runs `inboxctl --config configPath send args…` and returns its
// standard output and error; err is the process's exit error, if any.
func runSend(t *testing.T, configPath string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	bin := proctest.Build(t, ".")[0]
	var out, errOut strings.Builder
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"--config", configPath, "send"}, args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// serveReceiver serves a receiver configured from configPath, on db's pool,
// over loopback HTTP until the test ends.
func serveReceiver(t *testing.T, configPath string, db *dbtest.DB) *httptest.Server {
	t.Helper()
	cfg, err := config.Load(configPath, config.NeedReceiver)
	require.NoError(t, err)
	srv, stop, err := daemon.NewReceiver(&daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool})
	require.NoError(t, err)
	t.Cleanup(stop)
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestSendEveryProvider sends one delivery per configured source through the
// inboxctl binary to a receiver configured from the same file, and requires
// each to be accepted and stored under the event id its provider gives it.
func TestSendEveryProvider(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	configPath := writeSendConfig(t, db.URL)
	ts := serveReceiver(t, configPath, db)

	for _, tt := range []struct {
		source string
		args   []string // after --source and --url
		wantID string
	}{
		{"stripe", []string{"--data", `{"id":"evt_send_1","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1"}}}`}, "evt_send_1"},
		{"shopify", []string{"--id", "shp_webhook_1", "--type", "orders/create", "--data", `{"id":820982911946154500}`}, "shp_webhook_1"},
		{"standardwebhooks", []string{"--id", "msg_send_1", "--data", `{"type":"account.deposit"}`}, "msg_send_1"},
		{"svix", []string{"--id", "msg_svix_1", "--data", `{"type":"invoice.paid"}`}, "msg_svix_1"},
		{"github", []string{"--id", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "--type", "ping", "--data", `{"zen":"Keep it logically awesome."}`}, "72d3162e-cc78-11e3-81ab-4c9367dc0958"},
		{"square", []string{"--data", `{"event_id":"sq_evt_1","type":"payment.created","data":{}}`}, "sq_evt_1"},
		{"paddle", []string{"--data", `{"event_id":"evt_pdl_1","event_type":"transaction.completed","data":{}}`}, "evt_pdl_1"},
		{"slack", []string{"--data", `{"type":"event_callback","event_id":"Ev01SEND","event":{"type":"app_mention"}}`}, "Ev01SEND"},
		{"marqeta", []string{"--data", `{"transactions":[{"token":"txn_1","type":"authorization"}]}`}, "transactions:txn_1"},
		{"marqeta_basic", []string{"--data", `{"cardtransitions":[{"token":"ct_1","state":"ACTIVE"}]}`}, "cardtransitions:ct_1"},
		{"adyen", []string{"--data", `{"live":"false","notificationItems":[{"NotificationRequestItem":{` +
			`"amount":{"currency":"EUR","value":1999},"eventCode":"AUTHORISATION","merchantAccountCode":"TestMerchant",` +
			`"merchantReference":"order-1","pspReference":"PSP0001","success":"true"}}]}`}, "AUTHORISATION:PSP0001"},
		{"twilio", []string{"--data", `{"id":"EZ0001","type":"com.twilio.messaging.message.delivered","data":{}}`}, "EZ0001"},
		{"twilio_form", []string{"--id", "tw-idem-1", "--data", "MessageSid=SM0001&MessageStatus=delivered&Body=caf%C3%A9"}, "tw-idem-1"},
		{"hmac", []string{"--id", "hmac_evt_1", "--type", "order.created", "--data", `{"order":1}`}, "hmac_evt_1"},
		{"hmac_path", []string{"--data", `{"type":"order.created","data":{"id":"ord_1"}}`}, "ord_1"},
	} {
		t.Run(tt.source, func(t *testing.T) {
			t.Parallel()
			stdout, stderr, err := runSend(t, configPath, append([]string{"--source", tt.source, "--url", ts.URL}, tt.args...)...)
			require.NoError(t, err, "stdout: %s\nstderr: %s", stdout, stderr)
			require.Regexp(t, `^2\d\d `, stdout)

			// The receiver answers after the commit, so the row is there.
			ctx := context.Background()
			store := inboxstore.New(db.Pool)
			counts, err := store.Count(ctx, &inboxstore.Filter{Source: tt.source})
			require.NoError(t, err)
			require.Equal(t, inboxstore.Counts{Pending: 1}, *counts, "stored, and not failed")
			counts, err = store.Count(ctx, &inboxstore.Filter{Source: tt.source, EventIDPrefix: tt.wantID})
			require.NoError(t, err)
			require.Equal(t, inboxstore.Counts{Pending: 1}, *counts, "stored under event id %q", tt.wantID)
		})
	}
}

// TestSendRefusesWithoutHeaderKeys checks that send names the flags a
// provider that sends the event id or type in a header needs, and sends
// nothing without them.
func TestSendRefusesWithoutHeaderKeys(t *testing.T) {
	t.Parallel()
	configPath := writeSendConfig(t, dbtest.ServerURL(t))

	for _, tt := range []struct {
		name, source string
		args         []string
		want         string
	}{
		{"ShopifyNeedsBoth", "shopify", nil, `send: source "shopify" needs --id and --type: nothing sent`},
		{"ShopifyNeedsTheType", "shopify", []string{"--id", "shp_1"}, `send: source "shopify" needs --type: nothing sent`},
		{"GitHubNeedsTheID", "github", []string{"--type", "ping"}, `send: source "github" needs --id: nothing sent`},
		{"StandardWebhooksNeedsTheID", "standardwebhooks", []string{"--type", "account.deposit"}, `send: source "standardwebhooks" needs --id: nothing sent`},
		{"SvixNeedsTheID", "svix", nil, `send: source "svix" needs --id: nothing sent`},
		{"HMACWithIDAndTypeHeadersNeedsBoth", "hmac", nil, `send: source "hmac" needs --id and --type: nothing sent`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var requests atomic.Int64
			ts := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
				requests.Add(1)
				rw.WriteHeader(http.StatusOK)
			}))
			t.Cleanup(ts.Close)

			args := append([]string{"--source", tt.source, "--url", ts.URL, "--data", `{"type":"t","id":"in_the_body"}`}, tt.args...)
			stdout, stderr, err := runSend(t, configPath, args...)
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "want a non-zero exit; stdout: %s", stdout)
			require.Equal(t, 2, exit.ExitCode(), "a usage error")
			require.Contains(t, stderr, tt.want)
			require.Empty(t, stdout)
			// The process has exited, and send waits for the answer to what it
			// sends: a request would have been counted by now.
			require.Zero(t, requests.Load(), "requests received")
		})
	}
}
