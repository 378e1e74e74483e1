package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/config"
)

const (
	squareToken   = "EAAA_test_reconcile_token"
	squareKey     = "square signature key"
	squareHookURL = "https://hooks.example.com/webhooks/square"
)

// squareEvent is a Square event as SearchEvents lists it.
type squareEvent struct {
	MerchantID string         `json:"merchant_id"`
	LocationID string         `json:"location_id"`
	Type       string         `json:"type"`
	EventID    string         `json:"event_id"`
	CreatedAt  string         `json:"created_at"`
	Data       map[string]any `json:"data"`
}

func newSquareEvent(n int, at time.Time) squareEvent {
	return squareEvent{
		MerchantID: "MLEFBHHSJGVHD", LocationID: "L1", Type: "payment.updated",
		EventID: fmt.Sprintf("6a8f5f28-54a1-4eb0-a98a-%012d", n), CreatedAt: at.UTC().Format(time.RFC3339),
		Data: map[string]any{"type": "payment", "id": fmt.Sprintf("pay_%d", n), "object": map[string]any{"payment": map[string]any{"status": "COMPLETED"}}},
	}
}

// squareRequest is what the fake reads of a SearchEvents request.
type squareRequest struct {
	Cursor string `json:"cursor"`
	Limit  int    `json:"limit"`
	Query  struct {
		Filter struct {
			CreatedAt struct {
				StartAt time.Time `json:"start_at"`
				EndAt   time.Time `json:"end_at"`
			} `json:"created_at"`
		} `json:"filter"`
		Sort struct {
			Order string `json:"order"`
		} `json:"sort"`
	} `json:"query"`
}

// fakeSquare speaks SearchEvents (POST /v2/events) as Square documents it:
// bearer auth, Square-Version, a created_at range, limit, sort order and an
// opaque cursor that is only good with the original query; fail answers
// the requests it names.
type fakeSquare struct {
	events []squareEvent // oldest first
	fail   failures

	mu       sync.Mutex
	requests []squareRequest
}

func (f *fakeSquare) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var req squareRequest
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &req)
	f.mu.Lock()
	f.requests = append(f.requests, req)
	n := len(f.requests)
	first := f.requests[0]
	f.mu.Unlock()
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v2/events":
		http.NotFound(rw, r)
		return
	case r.Header.Get("Authorization") != "Bearer "+squareToken:
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte(`{"errors":[{"category":"AUTHENTICATION_ERROR","code":"UNAUTHORIZED","detail":"This request could not be authorized."}]}`))
		return
	case r.Header.Get("Square-Version") == "":
		http.Error(rw, "Square-Version is expected", http.StatusBadRequest)
		return
	case f.fail.answer(rw, n):
		return
	case req.Cursor != "" && req.Query != first.Query:
		http.Error(rw, "a cursor needs the original query", http.StatusBadRequest)
		return
	}
	var match []squareEvent
	for _, e := range f.events {
		at, _ := time.Parse(time.RFC3339, e.CreatedAt)
		if !at.Before(req.Query.Filter.CreatedAt.StartAt) && !at.After(req.Query.Filter.CreatedAt.EndAt) {
			match = append(match, e)
		}
	}
	start, _ := strconv.Atoi(req.Cursor)
	end := min(start+req.Limit, len(match))
	cursor := ""
	if end < len(match) {
		cursor = strconv.Itoa(end)
	}
	_ = json.NewEncoder(rw).Encode(map[string]any{"events": match[start:end], "cursor": cursor})
}

// webhook is the event as Square delivers it.
func (e squareEvent) webhook(t *testing.T) ([]byte, http.Header) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"merchant_id": e.MerchantID, "type": e.Type, "event_id": e.EventID, "created_at": e.CreatedAt, "data": e.Data})
	require.NoError(t, err)
	return body, http.Header{"X-Square-Hmacsha256-Signature": {sign.Square(squareKey, squareHookURL, body)}, "Content-Type": {"application/json"}}
}

func setupSquare(t *testing.T, fake *fakeSquare) (*inbox, *httptest.Server) {
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
		fake := &fakeSquare{fail: failures{2: http.StatusTooManyRequests}}
		fake.events = append(fake.events, newSquareEvent(0, now.Add(-5*time.Hour)))
		for i := 1; i <= 5; i++ {
			fake.events = append(fake.events, newSquareEvent(i, now.Add(-time.Duration(6-i)*time.Minute)))
		}
		in, server := setupSquare(t, fake)
		for _, i := range []int{2, 5} {
			body, header := fake.events[i].webhook(t)
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
			want = append(want, fake.events[i].EventID)
		}
		slices.Sort(want)
		require.Equal(t, want, in.eventIDs(t, "square"))
		require.Equal(t, 5, in.jobs(t))
		// Three pages of 2, 2 and 1; the second was rate-limited once and
		// asked again, cursor and all, after the Retry-After.
		require.Equal(t, []time.Duration{time.Second}, w.got)
		require.Len(t, fake.requests, 4)
		require.Equal(t, fake.requests[1], fake.requests[2])
		require.Equal(t, "2", fake.requests[2].Cursor)
		require.Equal(t, "ASC", fake.requests[0].Query.Sort.Order)
		require.True(t, now.Add(-time.Hour).Equal(fake.requests[0].Query.Filter.CreatedAt.StartAt))

		require.Equal(t, &reconcile.Result{Fetched: 5, Duplicates: 5}, counts(run()))
		require.Equal(t, 5, in.jobs(t))
	})

	t.Run("WrongTokenFailsWithSquaresMessage", func(t *testing.T) {
		t.Parallel()
		in, server := setupSquare(t, &fakeSquare{})
		fetcher, err := reconcile.NewSquare(&reconcile.SquareConfig{AccessToken: "EAAA_wrong", BaseURL: server.URL, Parser: in.parser(t, "square")})
		require.NoError(t, err)
		_, err = reconcile.Run(context.Background(), &reconcile.Params{Source: "square", Provider: "square", Fetcher: fetcher, Since: now, Claimer: in.ingester})
		require.ErrorContains(t, err, "POST /v2/events answered 401: UNAUTHORIZED: This request could not be authorized.")
		require.NotContains(t, err.Error(), "EAAA_wrong")
	})
}
