package webhook_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

func TestDeliverSendsWhatTheVerifierAccepts(t *testing.T) {
	t.Parallel()
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	verifier, err := provider.New("standardwebhooks", &provider.Config{Secrets: []string{secret}})
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d, err := verifier.Verify(body, r.Header)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = rw.Write([]byte(d.Events[0].ID))
	}))
	t.Cleanup(srv.Close)

	resp, err := webhook.Deliver(context.Background(), srv.Client(), srv.URL, &webhook.Params{
		Provider: "standardwebhooks", Secret: secret, EventID: "msg_1", Time: time.Now(),
		Body: []byte(`{"type":"t"}`),
	})
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "msg_1", string(resp.Body))
}
