package reconcile_test

import (
	"context"
	"encoding/json"
	"fmt"
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
	paddleKey    = "pdl_apikey_test_reconcile"
	paddleSecret = "pdl_ntfset_01reconcile_test_secret"
)

// paddleEvent is a Paddle Billing event entity.
type paddleEvent struct {
	EventID    string         `json:"event_id"`
	EventType  string         `json:"event_type"`
	OccurredAt string         `json:"occurred_at"`
	Data       map[string]any `json:"data"`
}

func newPaddleEvent(n int, at time.Time) paddleEvent {
	return paddleEvent{
		// Paddle ids sort by creation, as order_by=id relies on.
		EventID: fmt.Sprintf("evt_01hv%04d", n), EventType: "transaction.completed",
		OccurredAt: at.UTC().Format(time.RFC3339Nano), Data: map[string]any{"id": fmt.Sprintf("txn_%d", n), "status": "completed"},
	}
}

// fakePaddle speaks GET /events as Paddle documents it: bearer auth,
// order_by=id[DESC], per_page, the after cursor (an event id) and
// meta.pagination.has_more; fail answers the requests it names.
type fakePaddle struct {
	events []paddleEvent // newest first
	fail   failures

	mu       sync.Mutex
	requests []string
}

func (f *fakePaddle) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r.URL.RawQuery)
	n := len(f.requests)
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/events" {
		http.NotFound(rw, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+paddleKey {
		rw.WriteHeader(http.StatusForbidden)
		_, _ = rw.Write([]byte(`{"error":{"type":"request_error","code":"forbidden","detail":"You aren't permitted to perform this request."}}`))
		return
	}
	if f.fail.answer(rw, n) {
		return
	}
	q := r.URL.Query()
	if q.Get("order_by") != "id[DESC]" {
		http.Error(rw, "this fake lists newest first only", http.StatusBadRequest)
		return
	}
	perPage, _ := strconv.Atoi(q.Get("per_page"))
	start := 0
	if after := q.Get("after"); after != "" {
		start = slices.IndexFunc(f.events, func(e paddleEvent) bool { return e.EventID == after }) + 1
	}
	end := min(start+perPage, len(f.events))
	page := f.events[start:end]
	next := ""
	if end < len(f.events) {
		next = "https://api.paddle.com/events?after=" + page[len(page)-1].EventID
	}
	_ = json.NewEncoder(rw).Encode(map[string]any{"data": page, "meta": map[string]any{
		"request_id": "req_" + strconv.Itoa(n),
		"pagination": map[string]any{"per_page": perPage, "next": next, "has_more": end < len(f.events), "estimated_total": len(f.events)},
	}})
}

// webhook is the event as Paddle delivers it to a notification destination.
func (e paddleEvent) webhook(t *testing.T) ([]byte, http.Header) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"event_id": e.EventID, "event_type": e.EventType, "occurred_at": e.OccurredAt, "data": e.Data,
		"notification_id": "ntf_" + e.EventID,
	})
	require.NoError(t, err)
	return body, http.Header{"Paddle-Signature": {sign.Paddle(paddleSecret, time.Now(), body)}, "Content-Type": {"application/json"}}
}

func TestPaddleReconciliation(t *testing.T) {
	t.Parallel()
	now := time.Now()

	setup := func(t *testing.T, fake *fakePaddle) (*inbox, *httptest.Server) {
		t.Helper()
		in := setupInbox(t, config.SourceConfig{Name: "paddle", Provider: "paddle", Secrets: []config.Secret{paddleSecret}})
		server := httptest.NewServer(fake)
		t.Cleanup(server.Close)
		return in, server
	}

	t.Run("InsertsExactlyTheMissingEvents", func(t *testing.T) {
		t.Parallel()
		// Seven events in the last hour, newest first, and two before it.
		fake := &fakePaddle{fail: failures{2: http.StatusTooManyRequests, 3: http.StatusServiceUnavailable}}
		for i := 9; i >= 1; i-- {
			at := now.Add(-time.Duration(10-i) * time.Minute)
			if i <= 2 {
				at = now.Add(-time.Duration(4-i) * time.Hour)
			}
			fake.events = append(fake.events, newPaddleEvent(i, at))
		}
		in, server := setup(t, fake)
		// The webhooks brought 3, 5 and 9, through the receiver, signed.
		for _, e := range fake.events {
			if slices.Contains([]string{"evt_01hv0003", "evt_01hv0005", "evt_01hv0009"}, e.EventID) {
				body, header := e.webhook(t)
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
		require.Len(t, fake.requests, 5)
		require.Equal(t, time.Second, w.got[0], "the 429's Retry-After")
		require.InDelta(t, float64(reconcile.BackoffDefault)*3/4, float64(w.got[1]), float64(reconcile.BackoffDefault)/4, "a jittered first backoff")
		require.Equal(t, fake.requests[1], fake.requests[3], "a refused page is asked again as it was")
		require.Contains(t, fake.requests[3], "after=evt_01hv0007")
		require.Contains(t, fake.requests[4], "after=evt_01hv0004")

		// A second run finds nothing missing.
		require.Equal(t, &reconcile.Result{Fetched: 7, Duplicates: 7}, counts(run()))
		require.Equal(t, 7, in.jobs(t))
	})

	t.Run("AnOutageGivesUpAfterTheRetries", func(t *testing.T) {
		t.Parallel()
		fake := &fakePaddle{
			events: []paddleEvent{newPaddleEvent(1, now)},
			fail:   failures{1: http.StatusBadGateway, 2: http.StatusServiceUnavailable, 3: http.StatusServiceUnavailable},
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
		in, server := setup(t, &fakePaddle{})
		fetcher, err := reconcile.NewPaddle(&reconcile.PaddleConfig{APIKey: "pdl_wrong", BaseURL: server.URL, Parser: in.parser(t, "paddle")})
		require.NoError(t, err)
		_, err = reconcile.Run(context.Background(), &reconcile.Params{Source: "paddle", Provider: "paddle", Fetcher: fetcher, Since: now, Claimer: in.ingester})
		require.ErrorContains(t, err, "answered 403: forbidden: You aren't permitted")
		require.NotContains(t, err.Error(), "pdl_wrong")
	})
}
