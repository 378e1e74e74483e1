package receiver_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// The marqeta source of these tests: Basic Auth plus HMAC-SHA1, the less
// common of Marqeta's two algorithms.
const (
	marqetaE2ESecret   = "mq_e2e_hmac_5d1c"
	marqetaE2EUser     = "hookinbox_e2e"
	marqetaE2EPassword = "Marqeta-E2e-Passw0rd!"
)

func setupMarqetaE2E(t *testing.T) *e2eBundle {
	t.Helper()
	return setupE2E(t, config.SourceConfig{
		Name: "mq", Provider: "marqeta", Secrets: []config.Secret{marqetaE2ESecret}, Algorithm: "sha1",
		BasicAuth: []config.BasicAuthConfig{{Username: marqetaE2EUser, Password: marqetaE2EPassword}},
	})
}

// marqetaE2EDelivery signs body as Marqeta would for the test source.
func marqetaE2EDelivery(t *testing.T, body []byte) http.Header {
	t.Helper()
	header, err := webhook.Headers(&webhook.Params{
		Provider: "marqeta", Secret: marqetaE2ESecret, Body: body,
		Config: &provider.Config{BasicAuth: []provider.BasicAuth{{Username: marqetaE2EUser, Password: marqetaE2EPassword}}, Algorithm: "sha1"},
	})
	require.NoError(t, err)
	return header
}

// marqetaE2EBatch is a transactions batch with the given tokens.
func marqetaE2EBatch(tokens ...string) []byte {
	items := make([]string, len(tokens))
	for i, token := range tokens {
		items[i] = fmt.Sprintf(`{"token":%q,"type":"authorization","state":"PENDING","amount":%d.25,"currency_code":"USD"}`, token, i)
	}
	return []byte(`{"transactions":[` + strings.Join(items, ",") + `]}`)
}

func TestEndToEndMarqetaBatch(t *testing.T) {
	t.Parallel()
	b := setupMarqetaE2E(t)
	tokens := []string{"t0", "t1", "t2", "t3", "t4", "t3", "t6", "t7", "t8", "t9"} // t3 twice
	body := marqetaE2EBatch(tokens...)

	r := b.post(t, "mq", marqetaE2EDelivery(t, body), body)
	require.Equal(t, http.StatusOK, r.Status, "Marqeta counts anything but exactly 200 as a failure")
	require.Equal(t, map[string]int{"new": 9, "duplicates": 1, "twins": 0}, r.counts(t))
	var want []e2eRow
	for _, token := range []string{"t0", "t1", "t2", "t3", "t4", "t6", "t7", "t8", "t9"} {
		want = append(want, e2eRow{EventID: "transactions:" + token, EventType: "transactions", Status: "pending", HasJob: true})
	}
	require.Equal(t, want, b.rows(t))
	require.Equal(t, 9, b.jobCount(t))

	// Marqeta resends the whole batch when it saw no 200.
	r = b.post(t, "mq", marqetaE2EDelivery(t, body), body)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 10, "twins": 0}, r.counts(t))
	require.Equal(t, want, b.rows(t))
	require.Equal(t, 9, b.jobCount(t), "no new jobs")

	// A new batch overlapping the first stores only what is new.
	body = marqetaE2EBatch("t9", "t10")
	r = b.post(t, "mq", marqetaE2EDelivery(t, body), body)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 1, "twins": 0}, r.counts(t))
	require.Equal(t, 10, b.jobCount(t))
}

func TestEndToEndMarqetaTamperedBatchWritesNothing(t *testing.T) {
	t.Parallel()
	b := setupMarqetaE2E(t)
	body := marqetaE2EBatch("t0", "t1", "t2")
	header := marqetaE2EDelivery(t, body)
	tampered := []byte(strings.Replace(string(body), `"amount":1.25`, `"amount":1000.25`, 1))
	require.NotEqual(t, body, tampered)
	require.Equal(t, http.StatusUnauthorized, b.post(t, "mq", header, tampered).Status)

	// Either half of the composite check alone is not enough.
	noAuth := header.Clone()
	noAuth.Del("Authorization")
	require.Equal(t, http.StatusUnauthorized, b.post(t, "mq", noAuth, body).Status)
	noHMAC := header.Clone()
	noHMAC.Del("X-Marqeta-Signature")
	require.Equal(t, http.StatusUnauthorized, b.post(t, "mq", noHMAC, body).Status)
	wrongAuth := header.Clone()
	wrongAuth.Set("Authorization", "Basic bWFycWV0YTp3cm9uZw==")
	require.Equal(t, http.StatusUnauthorized, b.post(t, "mq", wrongAuth, body).Status)

	require.Empty(t, b.rows(t))
	require.Zero(t, b.jobCount(t))
}

func TestEndToEndMarqetaPingsAreAnsweredAndNotStored(t *testing.T) {
	t.Parallel()
	b := setupMarqetaE2E(t)
	ping := []byte(`{"pings":[{"token":"marqeta","payload":"healthcheck"}]}`)
	r := b.post(t, "mq", marqetaE2EDelivery(t, ping), ping)
	require.Equal(t, http.StatusOK, r.Status)
	require.Empty(t, b.rows(t))

	// An unauthenticated ping is refused like any delivery.
	header := marqetaE2EDelivery(t, ping)
	header.Del("Authorization")
	require.Equal(t, http.StatusUnauthorized, b.post(t, "mq", header, ping).Status)

	// Pings next to notifications are skipped.
	mixed := []byte(`{"pings":[{"token":"marqeta","payload":"healthcheck"}],"transactions":[{"token":"t0"}]}`)
	r = b.post(t, "mq", marqetaE2EDelivery(t, mixed), mixed)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	require.Equal(t, []e2eRow{{EventID: "transactions:t0", EventType: "transactions", Status: "pending", HasJob: true}}, b.rows(t))
}

func TestEndToEndMarqetaUnstorableNotificationsAreRecordedAsFailed(t *testing.T) {
	t.Parallel()
	b := setupMarqetaE2E(t)
	body := []byte(`{"cardtransitions":[{"token":"c0","state":"ACTIVE"},{"state":"ACTIVE"},{"token":"c2","reason":"a\u0000b"}]}`)
	r := b.post(t, "mq", marqetaE2EDelivery(t, body), body)
	require.Equal(t, http.StatusOK, r.Status)
	require.Equal(t, map[string]int{"new": 3, "duplicates": 0, "twins": 0}, r.counts(t))
	// Claims insert in key order, so find the rows by their ids.
	rows := b.rows(t)
	require.Len(t, rows, 3)
	byID := map[string]e2eRow{}
	var hashed e2eRow
	for _, row := range rows {
		byID[row.EventID] = row
		if strings.HasPrefix(row.EventID, "cardtransitions:sha256:") {
			hashed = row
		}
	}
	require.Equal(t, e2eRow{EventID: "cardtransitions:c0", EventType: "cardtransitions", Status: "pending", HasJob: true}, byID["cardtransitions:c0"])
	require.Regexp(t, `^cardtransitions:sha256:[0-9a-f]{64}$`, hashed.EventID)
	require.Equal(t, "failed", hashed.Status)
	require.Contains(t, hashed.LastError, `no event id`)
	require.False(t, hashed.HasJob)
	require.Equal(t, "failed", byID["cardtransitions:c2"].Status)
	require.Contains(t, byID["cardtransitions:c2"].LastError, `\u0000`)

	// A resend deduplicates the failed ones too.
	r = b.post(t, "mq", marqetaE2EDelivery(t, body), body)
	require.Equal(t, map[string]int{"new": 0, "duplicates": 3, "twins": 0}, r.counts(t))

	// A body that is no batch at all is one failed row keyed by its hash.
	garbage := []byte(`{"transactions":"not an array"}`)
	r = b.post(t, "mq", marqetaE2EDelivery(t, garbage), garbage)
	require.Equal(t, map[string]int{"new": 1, "duplicates": 0, "twins": 0}, r.counts(t))
	rows = b.rows(t)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, rows[3].EventID)
	require.Equal(t, "failed", rows[3].Status)
}
