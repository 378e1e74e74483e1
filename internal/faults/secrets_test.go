package faults_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// The secrets scenario 7 configures, each spelt so that a leak cannot be
// a coincidence.
const (
	marqetaSecret   = "mq_secret_0f7c2d9e61"
	marqetaPassword = "mq_password_5a8b1c"
	adminToken      = "admin_token_93e1f0a7c2b4"
	uiPassword      = "ui_password_c81d2e"
	dbPassword      = "db_password_7f3a90"
)

// TestSecrets is scenario 7: a receiver and a worker configured with a
// signing secret, a Basic Auth password, a River UI password, an admin
// token and a database password serve good and bad requests of every kind
// (signed, forged, wrong and right credentials, wrong and right tokens);
// then no secret may appear in any log line, metric page or answer body.
// The database URL carries a password the server (trust auth) never asks
// for, so that it is a configured secret like the others.
func TestSecrets(t *testing.T) {
	t.Parallel()
	row := record(t, "7 secrets in logs, metrics, bodies")
	db := ledgerDB(t)
	u, err := url.Parse(db.URL)
	require.NoError(t, err)
	u.User = url.UserPassword(u.User.Username(), dbPassword)
	config := setup{DB: u.String(),
		Sources: fmt.Sprintf(`  - {name: marqeta, provider: marqeta, secrets: [%q], basic_auth: [{username: hookinbox, password: %q}]}`, marqetaSecret, marqetaPassword),
		Routes:  `    - {source: marqeta, handlers: [log]}`,
		Extra: fmt.Sprintf(`  ui: {enabled: true, basic_auth: [{username: ops, password: %q}]}
  admin: {token: %q}`, uiPassword, adminToken),
	}.write(t)
	receiver, target := startReceiver(t, config)
	worker, workerAddr := startWorker(t, config)
	worker.WaitLine(t, "worker started")
	receiverBase := target[:len(target)-len("/webhooks/bank")]
	workerBase := "http://" + workerAddr

	bodies := map[string]string{}
	do := func(name string, req *http.Request, want int) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err, name)
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, want, resp.StatusCode, "%s: %s", name, b)
		bodies[name] = string(b)
		row.Offered++
	}
	newReq := func(method, u string, body []byte) *http.Request {
		req, err := http.NewRequestWithContext(context.Background(), method, u, bytes.NewReader(body))
		require.NoError(t, err)
		return req
	}

	d := faults.Deposit{ID: "secret_1", Account: "acc_0", Cents: 100}
	good, err := faults.Sign(context.Background(), target, secret, &d, time.Now())
	require.NoError(t, err)
	do("signed delivery", good, http.StatusOK)
	forged, err := faults.Sign(context.Background(), target, "whsec_"+"Zm9yZ2VkLWtleS1mb3ItZmF1bHRz", &d, time.Now())
	require.NoError(t, err)
	do("forged delivery", forged, http.StatusUnauthorized)
	old, err := faults.Sign(context.Background(), target, secret, &d, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	do("replayed delivery", old, http.StatusUnauthorized)

	mqBody := []byte(`{"transactions":[{"token":"tx_1","type":"authorization","state":"PENDING"}]}`)
	mqConfig := &provider.Config{Secrets: []string{marqetaSecret}, BasicAuth: []provider.BasicAuth{{Username: "hookinbox", Password: marqetaPassword}}}
	signed, err := webhook.Sign(&webhook.Params{Provider: "marqeta", Secret: marqetaSecret, Body: mqBody, Config: mqConfig})
	require.NoError(t, err)
	mq := newReq(http.MethodPost, receiverBase+"/webhooks/marqeta", signed.Body)
	mq.Header = signed.Header.Clone()
	do("marqeta, right credentials", mq, http.StatusOK)
	mq = newReq(http.MethodPost, receiverBase+"/webhooks/marqeta", signed.Body)
	mq.Header = signed.Header.Clone()
	mq.SetBasicAuth("hookinbox", marqetaPassword+"x")
	do("marqeta, wrong password", mq, http.StatusUnauthorized)

	req := newReq(http.MethodGet, workerBase+"/admin/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken+"x")
	do("admin API, wrong token", req, http.StatusUnauthorized)
	req = newReq(http.MethodGet, workerBase+"/admin/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	do("admin API, right token", req, http.StatusOK)
	req = newReq(http.MethodGet, workerBase+"/riverui/", nil)
	req.SetBasicAuth("ops", uiPassword+"x")
	do("River UI, wrong password", req, http.StatusUnauthorized)
	req = newReq(http.MethodGet, workerBase+"/riverui/", nil)
	req.SetBasicAuth("ops", uiPassword)
	do("River UI, right password", req, http.StatusOK)
	do("receiver metrics", newReq(http.MethodGet, receiverBase+"/metrics", nil), http.StatusOK)
	do("worker metrics", newReq(http.MethodGet, workerBase+"/metrics", nil), http.StatusOK)
	waitDone(t, worker, db.Pool, 1, time.Minute)

	texts := map[string]string{"receiver log": receiver.Log(), "worker log": worker.Log()}
	for name, b := range bodies {
		if name != "River UI, right password" { // the UI's own page, not an error or a figure
			texts[name] = b
		}
	}
	secrets := []string{secret, secret[len("whsec_"):], marqetaSecret, marqetaPassword, adminToken, uiPassword, dbPassword}
	lines := noSecrets(t, secrets, texts)
	row.Acked = row.Offered
	row.Note = fmt.Sprintf("%d secrets, %d requests; %d lines of logs, metrics and bodies scanned, none found", len(secrets), row.Offered, lines)
}
