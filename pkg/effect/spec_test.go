package effect_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/effect"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

func TestDefaultSpec(t *testing.T) {
	t.Parallel()
	received := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		provider, eventType, payload string
		headers                      map[string]string
		kind, id                     string
		version                      int64
		eventTime                    time.Time
	}{
		{provider: "stripe", eventType: "customer.updated",
			payload: `{"id":"evt_1","created":1764579600,"data":{"object":{"object":"customer","id":"cus_1"}}}`,
			kind:    "customer", id: "cus_1", version: 1764579600, eventTime: time.Unix(1764579600, 0).UTC()},
		{provider: "shopify", eventType: "orders/updated",
			payload: `{"id":450789469,"updated_at":"2026-12-01T10:00:00-05:00"}`,
			headers: map[string]string{"X-Shopify-Triggered-At": "2026-12-01T15:00:01.5Z"},
			kind:    "orders", id: "450789469", version: time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC).UnixMicro(),
			eventTime: time.Date(2026, 12, 1, 15, 0, 1, 500_000_000, time.UTC)},
		{provider: "shopify", eventType: "products/update", payload: `{"id":7}`,
			headers: map[string]string{"x-shopify-triggered-at": "2026-12-01T15:00:01Z"},
			kind:    "products", id: "7", version: time.Date(2026, 12, 1, 15, 0, 1, 0, time.UTC).UnixMicro(),
			eventTime: time.Date(2026, 12, 1, 15, 0, 1, 0, time.UTC)},
		{provider: "square", eventType: "payment.updated",
			payload: `{"created_at":"2026-12-01T09:00:00Z","data":{"type":"payment","id":"pay_1","object":{"payment":{"id":"pay_1","version":4}}}}`,
			kind:    "payment", id: "pay_1", version: 4, eventTime: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)},
		{provider: "paddle", eventType: "subscription.updated",
			payload: `{"event_id":"evt_1","occurred_at":"2026-12-01T09:00:00.123456Z","data":{"id":"sub_1"}}`,
			kind:    "subscription", id: "sub_1", version: time.Date(2026, 12, 1, 9, 0, 0, 123456000, time.UTC).UnixMicro(),
			eventTime: time.Date(2026, 12, 1, 9, 0, 0, 123456000, time.UTC)},
	} {
		spec, ok := effect.DefaultSpec(c.provider)
		require.True(t, ok, c.provider)
		require.NoError(t, spec.Validate())
		ev := &inbox.Event{ID: 3, Source: "src", Provider: c.provider, EventID: "e", EventType: c.eventType,
			Payload: json.RawMessage(c.payload), Headers: c.headers, ReceivedAt: received}
		s, err := spec.Snapshot(ev)
		require.NoError(t, err, c.provider)
		require.Equal(t, c.kind, s.Kind, c.provider)
		require.Equal(t, c.id, s.ObjectID, c.provider)
		require.Equal(t, c.version, s.Version, c.provider)
		require.True(t, c.eventTime.Equal(s.EventTime), "%s: event time %v, want %v", c.provider, s.EventTime, c.eventTime)
	}
}

func TestSpecErrors(t *testing.T) {
	t.Parallel()
	spec := effect.Spec{Kind: "=customer", ID: "data.id", Version: "data.version"}
	_, err := spec.Snapshot(&inbox.Event{Payload: json.RawMessage(`{"data":{"id":"c"}}`)})
	require.ErrorIs(t, err, effect.ErrNotLocated)
	require.ErrorContains(t, err, "version (data.version)")
	_, err = spec.Snapshot(&inbox.Event{Payload: json.RawMessage(`{"data":{"id":"c","version":"soon"}}`)})
	require.ErrorContains(t, err, `"soon" is neither an integer nor an RFC 3339 time`)
	require.ErrorContains(t, (&effect.Spec{Tie: "x"}).Validate(), "id: a locator is required")
	_, ok := effect.DefaultSpec("github")
	require.False(t, ok)
}
