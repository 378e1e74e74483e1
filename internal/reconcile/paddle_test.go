package reconcile_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/testkit/providerapi"
	"github.com/hookinbox/hookinbox/pkg/config"
)

const (
	paddleKey    = "pdl_apikey_test_reconcile"
	paddleSecret = "pdl_ntfset_01reconcile_test_secret"
)

func TestPaddleReconciliation(t *testing.T) {
	t.Parallel()
	now := time.Now()

	setup := func(t *testing.T, fake *providerapi.Paddle) (*inbox, *httptest.Server) {
		t.Helper()
		in := setupInbox(t, config.SourceConfig{Name: "paddle", Provider: "paddle", Secrets: []config.Secret{paddleSecret}})
		server := httptest.NewServer(fake)
		t.Cleanup(server.Close)
		return in, server
	}

	t.Run("InsertsExactlyTheMissingEvents", func(t *testing.T) {
		t.Parallel()
		// Seven events in the last hour, newest first, and two before it.
		fake := &providerapi.Paddle{Key: paddleKey, Fail: providerapi.Failures{2: http.StatusTooManyRequests, 3: http.StatusServiceUnavailable}}
		for i := 9; i >= 1; i-- {
			at := now.Add(-time.Duration(10-i) * time.Minute)
			if i <= 2 {
				at = now.Add(-time.Duration(4-i) * time.Hour)
			}
			fake.Events = append(fake.Events, providerapi.NewPaddleEvent(i, at))
		}
		in, server := setup(t, fake)
		// The webhooks brought 3, 5 and 9, through the receiver, signed.
		for _, e := range fake.Events {
			if slices.Contains([]string{"evt_01hv0003", "evt_01hv0005", "evt_01hv0009"}, e.EventID) {
				body, header := e.Webhook(t, paddleSecret)
				in.post(t, "paddle", header, body)
			}
		}
		w := &waits{}
		fetcher, err := reconcile.NewPaddle(&reconcile.PaddleConfig{
			APIKey: paddleKey, BaseURL: server.URL, Parser: in.parser(t, "paddle"), PageSize: 3,
			Retry: reconcile.RetryConfig{Sleep: w.sleep},
		})
		require.NoError(t, err)
		run := func() *reconcile.Result {
			res, err := reconcile.Run(context.Background(), &reconcile.Params{
				Source: "paddle", Provider: "paddle", Fetcher: fetcher, Since: now.Add(-time.Hour), Claimer: in.ingester,
			})
			require.NoError(t, err)
			return res
		}

		require.Equal(t, &reconcile.Result{Fetched: 7, New: 4, Duplicates: 3}, counts(run()))
		require.Equal(t, []string{"evt_01hv0003", "evt_01hv0004", "evt_01hv0005", "evt_01hv0006", "evt_01hv0007", "evt_01hv0008", "evt_01hv0009"},
			in.eventIDs(t, "paddle"))
		require.Equal(t, 7, in.jobs(t), "one job per event, none twice")
		// Pages 9-7, 6-4 (asked three times: a 429 that named its wait,
		// then a 503 that named none), 3-1, where the run stopped at the
		// first event older than the window.
		require.Len(t, fake.Requests, 5)
		require.Equal(t, time.Second, w.got[0], "the 429's Retry-After")
		require.InDelta(t, float64(reconcile.BackoffDefault)*3/4, float64(w.got[1]), float64(reconcile.BackoffDefault)/4, "a jittered first backoff")
		require.Equal(t, fake.Requests[1], fake.Requests[3], "a refused page is asked again as it was")
		require.Contains(t, fake.Requests[3], "after=evt_01hv0007")
		require.Contains(t, fake.Requests[4], "after=evt_01hv0004")

		// A second run finds nothing missing.
		require.Equal(t, &reconcile.Result{Fetched: 7, Duplicates: 7}, counts(run()))
		require.Equal(t, 7, in.jobs(t))
	})

	t.Run("AnOutageGivesUpAfterTheRetries", func(t *testing.T) {
		t.Parallel()
		fake := &providerapi.Paddle{Key: paddleKey,
			Events: []providerapi.PaddleEvent{providerapi.NewPaddleEvent(1, now)},
			Fail:   providerapi.Failures{1: http.StatusBadGateway, 2: http.StatusServiceUnavailable, 3: http.StatusServiceUnavailable},
		}
		in, server := setup(t, fake)
		w := &waits{}
		fetcher, err := reconcile.NewPaddle(&reconcile.PaddleConfig{
			APIKey: paddleKey, BaseURL: server.URL, Parser: in.parser(t, "paddle"), Retry: reconcile.RetryConfig{MaxRetries: 2, Sleep: w.sleep},
		})
		require.NoError(t, err)
		_, err = reconcile.Run(context.Background(), &reconcile.Params{
			Source: "paddle", Provider: "paddle", Fetcher: fetcher, Since: now.Add(-time.Hour), Claimer: in.ingester,
		})
		require.ErrorContains(t, err, "GET /events answered 503")
		require.Len(t, w.got, 2)
		require.Empty(t, in.eventIDs(t, "paddle"))
	})

	t.Run("WrongKeyFailsWithPaddlesMessage", func(t *testing.T) {
		t.Parallel()
		in, server := setup(t, &providerapi.Paddle{Key: paddleKey})
		fetcher, err := reconcile.NewPaddle(&reconcile.PaddleConfig{APIKey: "pdl_wrong", BaseURL: server.URL, Parser: in.parser(t, "paddle")})
		require.NoError(t, err)
		_, err = reconcile.Run(context.Background(), &reconcile.Params{Source: "paddle", Provider: "paddle", Fetcher: fetcher, Since: now, Claimer: in.ingester})
		require.ErrorContains(t, err, "answered 403: forbidden: You aren't permitted")
		require.NotContains(t, err.Error(), "pdl_wrong")
	})
}
