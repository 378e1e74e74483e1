package receiver_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// The adyen source of these tests. The new key is adyen-go's test key
// (/work/shared/providers.md §9); both are configured, as during a rotation.
const (
	adyenE2EOldKey   = "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056"
	adyenE2ENewKey   = "DFB1EB5485895CFA84146406857104ABB4CBCABDC8AAF103A624C8F6A3EAAB00"
	adyenE2EUser     = "ws_hookinbox@Company.Test"
	adyenE2EPassword = "adyen-e2e-password"
)

func setupAdyenE2E(t *testing.T) *e2eBundle {
	t.Helper()
	return setupE2E(t, config.SourceConfig{
		Name: "adyen", Provider: "adyen", Secrets: []config.Secret{adyenE2EOldKey, adyenE2ENewKey},
		BasicAuth: []config.BasicAuthConfig{{Username: adyenE2EUser, Password: adyenE2EPassword}},
	})
}

// adyenE2EBody is a notification of AUTHORISATION items for pspReferences,
// with every item signed with hexKey by sign.AdyenBody.
func adyenE2EBody(t *testing.T, hexKey string, pspReferences ...string) []byte {
	t.Helper()
	items := make([]string, len(pspReferences))
	for i, psp := range pspReferences {
		items[i] = fmt.Sprintf(`{"NotificationRequestItem":{"additionalData":{"authCode":"058705"},`+
			`"amount":{"currency":"EUR","value":%d},"eventCode":"AUTHORISATION","eventDate":"2026-11-29T10:00:00+01:00",`+
			`"merchantAccountCode":"TestMerchant","merchantReference":"order-%s","paymentMethod":"visa",`+
			`"pspReference":%q,"reason":"058705:1111:03/2030","success":"true"}}`, 1000+i, psp, psp)
	}
	body, err := sign.AdyenBody(hexKey, []byte(`{"live":"false","notificationItems":[`+strings.Join(items, ",")+`]}`))
	require.NoError(t, err)
	return body
}

// adyenE2EDelivery returns the headers Adyen sends: Basic Auth, the
// signatures being in the body.
func adyenE2EDelivery(t *testing.T, body []byte) http.Header {
	t.Helper()
	header, err := webhook.Headers(&webhook.Params{
		Provider: "adyen", Body: body,
		Config: &provider.Config{BasicAuth: []provider.BasicAuth{{Username: adyenE2EUser, Password: adyenE2EPassword}}},
	})
	require.NoError(t, err)
	return header
}

// requireAccepted requires Adyen's own success answer.
func requireAccepted(t *testing.T, r e2eReply) {
	t.Helper()
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, "[accepted]", string(r.Body))
	require.Equal(t, "text/plain", r.Header.Get("Content-Type"))
}

func TestEndToEndAdyenBatch(t *testing.T) {
	t.Parallel()
	b := setupAdyenE2E(t)
	psps := []string{"P0", "P1", "P2", "P3", "P4", "P5", "P6", "P2", "P8", "P9"} // P2 twice
	body := adyenE2EBody(t, adyenE2ENewKey, psps...)

	requireAccepted(t, b.post(t, "adyen", adyenE2EDelivery(t, body), body))
	var want []e2eRow
	for _, psp := range []string{"P0", "P1", "P2", "P3", "P4", "P5", "P6", "P8", "P9"} {
		want = append(want, e2eRow{EventID: "AUTHORISATION:" + psp, EventType: "AUTHORISATION", Status: "pending", HasJob: true})
	}
	require.Equal(t, want, b.rows(t))
	require.Equal(t, 9, b.jobCount(t))

	// Adyen retries what it did not see accepted: the same items again.
	requireAccepted(t, b.post(t, "adyen", adyenE2EDelivery(t, body), body))
	require.Equal(t, want, b.rows(t))
	require.Equal(t, 9, b.jobCount(t), "no new jobs")

	// Signed with the old key during a rotation: still accepted.
	body = adyenE2EBody(t, adyenE2EOldKey, "P9", "P10")
	requireAccepted(t, b.post(t, "adyen", adyenE2EDelivery(t, body), body))
	require.Len(t, b.rows(t), 10)
	require.Equal(t, 10, b.jobCount(t))
}

func TestEndToEndAdyenOneForgedItemWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupAdyenE2E(t)
	body := adyenE2EBody(t, adyenE2ENewKey, "P0", "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9")

	// One item's amount changed after signing: its HMAC no longer matches.
	tampered := []byte(strings.Replace(string(body), `"value":1006`, `"value":1`, 1))
	require.NotEqual(t, body, tampered)
	r := b.post(t, "adyen", adyenE2EDelivery(t, tampered), tampered)
	require.Equal(t, http.StatusUnauthorized, r.Status)

	// One item signed with a key the source does not have.
	forged := adyenE2EBody(t, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "P7")
	_, forgedItem, _ := strings.Cut(string(forged), "[")
	mixed := []byte(strings.Replace(string(body), "]}", ","+forgedItem, 1))
	require.True(t, json.Valid(mixed), "the 401 must come from the forged item, not from broken JSON")
	require.Equal(t, http.StatusUnauthorized, b.post(t, "adyen", adyenE2EDelivery(t, mixed), mixed).Status)

	// Genuine items without Basic Auth.
	header := adyenE2EDelivery(t, body)
	header.Del("Authorization")
	require.Equal(t, http.StatusUnauthorized, b.post(t, "adyen", header, body).Status)

	require.Empty(t, b.rows(t))
	require.Zero(t, b.jobCount(t))
}

func TestEndToEndAdyenUnstorableItemIsRecordedAsFailed(t *testing.T) {
	t.Parallel()
	b := setupAdyenE2E(t)
	body := adyenE2EBody(t, adyenE2ENewKey, "P0", "P1")
	// The reason is not signed; a NUL in it keeps the item authentic but
	// unstorable as jsonb.
	body = []byte(strings.Replace(string(body), `"reason":"058705:1111:03/2030"`, `"reason":"a\u0000b"`, 1))
	requireAccepted(t, b.post(t, "adyen", adyenE2EDelivery(t, body), body))
	rows := b.rows(t)
	require.Len(t, rows, 2)
	require.Equal(t, "AUTHORISATION:P0", rows[0].EventID)
	require.Equal(t, "failed", rows[0].Status)
	require.Contains(t, rows[0].LastError, `\u0000`)
	require.False(t, rows[0].HasJob)
	require.Equal(t, e2eRow{EventID: "AUTHORISATION:P1", EventType: "AUTHORISATION", Status: "pending", HasJob: true}, rows[1])
}
