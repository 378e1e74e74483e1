package providerapi

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Stripe speaks GET /v1/events as Stripe documents it: bearer auth (Key),
// created[gte] and created[lte], limit, starting_after, newest first,
// has_more; and answers 429 with Retry-After to the requests RateLimit
// names (by request number, from 1).
type Stripe struct {
	Key       string
	Events    []StripeEvent // newest first
	RateLimit map[int]bool

	mu       sync.Mutex
	Requests []string // each request's query
}

// StripeEvent is a Stripe event object.
type StripeEvent struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Type    string `json:"type"`
	Created int64  `json:"created"`
	Data    struct {
		Object map[string]any `json:"object"`
	} `json:"data"`
}

// NewStripeEvent returns an event of type typ about payment intent
// objectID.
func NewStripeEvent(id, typ string, created time.Time, objectID string) StripeEvent {
	ev := StripeEvent{ID: id, Object: "event", Type: typ, Created: created.Unix()}
	ev.Data.Object = map[string]any{"id": objectID, "object": "payment_intent"}
	return ev
}

func (f *Stripe) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.Requests = append(f.Requests, r.URL.RawQuery)
	n := len(f.Requests)
	f.mu.Unlock()
	if r.Method != http.MethodGet || r.URL.Path != "/v1/events" {
		http.NotFound(rw, r)
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+f.Key {
		rw.WriteHeader(http.StatusUnauthorized)
		_, _ = rw.Write([]byte(`{"error":{"message":"Invalid API Key provided","type":"invalid_request_error"}}`))
		return
	}
	if f.RateLimit[n] {
		rw.Header().Set("Retry-After", "2")
		rw.WriteHeader(http.StatusTooManyRequests)
		_, _ = rw.Write([]byte(`{"error":{"message":"Too many requests","type":"rate_limit_error"}}`))
		return
	}
	q := r.URL.Query()
	gte, err := strconv.ParseInt(q.Get("created[gte]"), 10, 64)
	if err != nil {
		http.Error(rw, "created[gte] is required here", http.StatusBadRequest)
		return
	}
	lte := int64(1<<63 - 1)
	if v := q.Get("created[lte]"); v != "" {
		if lte, err = strconv.ParseInt(v, 10, 64); err != nil {
			http.Error(rw, "created[lte] must be a unix time", http.StatusBadRequest)
			return
		}
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	after := q.Get("starting_after")
	var page []StripeEvent
	started := after == ""
	more := false
	for _, ev := range f.Events {
		if !started {
			started = ev.ID == after
			continue
		}
		if ev.Created < gte || ev.Created > lte {
			continue
		}
		if len(page) == limit {
			more = true
			break
		}
		page = append(page, ev)
	}
	_ = json.NewEncoder(rw).Encode(map[string]any{"object": "list", "url": "/v1/events", "has_more": more, "data": page})
}
