package providerapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// PaddleEvent is a Paddle Billing event entity.
type PaddleEvent struct {
	EventID    string         `json:"event_id"`
	EventType  string         `json:"event_type"`
	OccurredAt string         `json:"occurred_at"`
	Data       map[string]any `json:"data"`
}

// NewPaddleEvent returns the transaction.completed event number n.
func NewPaddleEvent(n int, at time.Time) PaddleEvent {
	return PaddleEvent{
		// Paddle ids sort by creation, as order_by=id relies on.
		EventID: fmt.Sprintf("evt_01hv%04d", n), EventType: "transaction.completed",
		OccurredAt: at.UTC().Format(time.RFC3339Nano), Data: map[string]any{"id": fmt.Sprintf("txn_%d", n), "status": "completed"},
	}
}

// Webhook is the event as Paddle delivers it to a notification
// destination whose secret is secret.
func (e PaddleEvent) Webhook(tb testing.TB, secret string) ([]byte, http.Header) {
	tb.Helper()
	body, err := json.Marshal(map[string]any{
		"event_id": e.EventID, "event_type": e.EventType, "occurred_at": e.OccurredAt, "data": e.Data,
		"notification_id": "ntf_" + e.EventID,
	})
	require.NoError(tb, err)
	return body, http.Header{"Paddle-Signature": {sign.Paddle(secret, time.Now(), body)}, "Content-Type": {"application/json"}}
}

// Paddle speaks GET /events as Paddle documents it: bearer auth (Key),
// order_by=id[DESC], per_page, the after cursor (an event id) and
// meta.pagination.has_more; Fail answers the requests it names.
type Paddle struct {
	Key    string
	Events []PaddleEvent // newest first
	Fail   Failures

	mu       sync.Mutex
	Requests []string // each request's query
}

func (f *Paddle) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.Requests = append(f.Requests, r.URL.RawQuery)
	n := len(f.Requests)
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/events" {
		http.NotFound(rw, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		rw.WriteHeader(http.StatusForbidden)
		_, _ = rw.Write([]byte(`{"error":{"type":"request_error","code":"forbidden","detail":"You aren't permitted to perform this request."}}`))
		return
	}
	if f.Fail.Answer(rw, n) {
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
		start = slices.IndexFunc(f.Events, func(e PaddleEvent) bool { return e.EventID == after }) + 1
	}
	end := min(start+perPage, len(f.Events))
	page := f.Events[start:end]
	next := ""
	if end < len(f.Events) {
		next = "https://api.paddle.com/events?after=" + page[len(page)-1].EventID
	}
	_ = json.NewEncoder(rw).Encode(map[string]any{"data": page, "meta": map[string]any{
		"request_id": "req_" + strconv.Itoa(n),
		"pagination": map[string]any{"per_page": perPage, "next": next, "has_more": end < len(f.Events), "estimated_total": len(f.Events)},
	}})
}
