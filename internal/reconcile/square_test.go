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
	squareToken   = "EAAA_test_reconcile_token"
	squareKey     = "square signature key"
	squareHookURL = "https://hooks.example.com/webhooks/square"
)

func setupSquare(t *testing.T, fake *providerapi.Square) (*inbox, *httptest.Server) {
	t.Helper()
	in := setupInbox(t, config.SourceConfig{Name: "square", Provider: "square", Secrets: []config.Secret{squareKey}, URL: squareHookURL})
	server := httptest.NewServer(fake)
	t.Cleanup(server.Close)
	return in, server
}

func TestSquareReconciliation(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Second)

	t.Run("InsertsExactlyTheMissingEvents", func(t *testing.T) {
		t.Parallel()
		fake := &providerapi.Square{Token: squareToken, Fail: providerapi.Failures{2: http.StatusTooManyRequests}}
		fake.Events = append(fake.Events, providerapi.NewSquareEvent(0, now.Add(-5*time.Hour)))
		for i := 1; i <= 5; i++ {
			fake.Events = append(fake.Events, providerapi.NewSquareEvent(i, now.Add(-time.Duration(6-i)*time.Minute)))
		}
		in, server := setupSquare(t, fake)
		for _, i := range []int{2, 5} {
			body, header := fake.Events[i].Webhook(t, squareKey, squareHookURL)
			in.post(t, "square", header, body)
		}
		w := &waits{}
		fetcher, err := reconcile.NewSquare(&reconcile.SquareConfig{
			AccessToken: squareToken, BaseURL: server.URL, Parser: in.parser(t, "square"), PageSize: 2,
			Retry: reconcile.RetryConfig{Sleep: w.sleep}, Now: func() time.Time { return now },
		})
		require.NoError(t, err)
		run := func() *reconcile.Result {
			res, err := reconcile.Run(context.Background(), &reconcile.Params{
				Source: "square", Provider: "square", Fetcher: fetcher, Since: now.Add(-time.Hour), Claimer: in.ingester,
			})
			require.NoError(t, err)
			return res
		}
		require.Equal(t, &reconcile.Result{Fetched: 5, New: 3, Duplicates: 2}, counts(run()))
		want := []string{}
		for i := 1; i <= 5; i++ {
			want = append(want, fake.Events[i].EventID)
		}
		slices.Sort(want)
		require.Equal(t, want, in.eventIDs(t, "square"))
		require.Equal(t, 5, in.jobs(t))
		// Three pages of 2, 2 and 1; the second was rate-limited once and
		// asked again, cursor and all, after the Retry-After.
		require.Equal(t, []time.Duration{time.Second}, w.got)
		require.Len(t, fake.Requests, 4)
		require.Equal(t, fake.Requests[1], fake.Requests[2])
		require.Equal(t, "2", fake.Requests[2].Cursor)
		require.Equal(t, "ASC", fake.Requests[0].Query.Sort.Order)
		require.True(t, now.Add(-time.Hour).Equal(fake.Requests[0].Query.Filter.CreatedAt.StartAt))

		require.Equal(t, &reconcile.Result{Fetched: 5, Duplicates: 5}, counts(run()))
		require.Equal(t, 5, in.jobs(t))
	})

	t.Run("WrongTokenFailsWithSquaresMessage", func(t *testing.T) {
		t.Parallel()
		in, server := setupSquare(t, &providerapi.Square{Token: squareToken})
		fetcher, err := reconcile.NewSquare(&reconcile.SquareConfig{AccessToken: "EAAA_wrong", BaseURL: server.URL, Parser: in.parser(t, "square")})
		require.NoError(t, err)
		_, err = reconcile.Run(context.Background(), &reconcile.Params{Source: "square", Provider: "square", Fetcher: fetcher, Since: now, Claimer: in.ingester})
		require.ErrorContains(t, err, "POST /v2/events answered 401: UNAUTHORIZED: This request could not be authorized.")
		require.NotContains(t, err.Error(), "EAAA_wrong")
	})
}
