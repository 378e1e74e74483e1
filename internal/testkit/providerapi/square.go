package providerapi

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// SquareEvent is a Square event as SearchEvents lists it.
type SquareEvent struct {
	MerchantID string         `json:"merchant_id"`
	LocationID string         `json:"location_id"`
	Type       string         `json:"type"`
	EventID    string         `json:"event_id"`
	CreatedAt  string         `json:"created_at"`
	Data       map[string]any `json:"data"`
}

// NewSquareEvent returns the payment.updated event number n.
func NewSquareEvent(n int, at time.Time) SquareEvent {
	return SquareEvent{
		MerchantID: "MLEFBHHSJGVHD", LocationID: "L1", Type: "payment.updated",
		EventID: fmt.Sprintf("6a8f5f28-54a1-4eb0-a98a-%012d", n), CreatedAt: at.UTC().Format(time.RFC3339),
		Data: map[string]any{"type": "payment", "id": fmt.Sprintf("pay_%d", n), "object": map[string]any{"payment": map[string]any{"status": "COMPLETED"}}},
	}
}

// Webhook is the event as Square delivers it to hookURL, signed with key.
func (e SquareEvent) Webhook(tb testing.TB, key, hookURL string) ([]byte, http.Header) {
	tb.Helper()
	body, err := json.Marshal(map[string]any{"merchant_id": e.MerchantID, "type": e.Type, "event_id": e.EventID, "created_at": e.CreatedAt, "data": e.Data})
	require.NoError(tb, err)
	return body, http.Header{"X-Square-Hmacsha256-Signature": {sign.Square(key, hookURL, body)}, "Content-Type": {"application/json"}}
}

// SquareRequest is what the fake reads of a SearchEvents request.
type SquareRequest struct {
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

// Square speaks SearchEvents (POST /v2/events) as Square documents it:
// bearer auth (Token), Square-Version, a created_at range, limit, sort
// order and an opaque cursor that is only good with the original query;
// Fail answers the requests it names.
type Square struct {
	Token  string
	Events []SquareEvent // oldest first
	Fail   Failures

	mu       sync.Mutex
	Requests []SquareRequest
}

func (f *Square) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	var req SquareRequest
	raw, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(raw, &req)
	f.mu.Lock()
	f.Requests = append(f.Requests, req)
	n := len(f.Requests)
	first := f.Requests[0]
	f.mu.Unlock()
	switch {
	case r.Method != http.MethodPost || r.URL.Path != "/v2/events":
		http.NotFound(rw, r)
		return
	case r.Header.Get("Authorization") != "Bearer "+f.Token:
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte(`{"errors":[{"category":"AUTHENTICATION_ERROR","code":"UNAUTHORIZED","detail":"This request could not be authorized."}]}`))
		return
	case r.Header.Get("Square-Version") == "":
		http.Error(rw, "Square-Version is expected", http.StatusBadRequest)
		return
	case f.Fail.Answer(rw, n):
		return
	case req.Cursor != "" && req.Query != first.Query:
		http.Error(rw, "a cursor needs the original query", http.StatusBadRequest)
		return
	}
	var match []SquareEvent
	for _, e := range f.Events {
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
