package inboxstore

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestDeliveryEvents(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	sum := sha256.Sum256(body)
	bodyKey := "sha256:" + hex.EncodeToString(sum[:])
	headers := map[string]string{"Webhook-Id": "evt_1"}

	d := &Delivery{Source: "s", Provider: "p", Body: body, Headers: headers, Events: []IncomingEvent{
		{ID: "evt_1", Type: "t", Payload: body, TwinKey: "k"},
		{ID: "", ParseError: errors.New("no id")},
		{ID: strings.Repeat("x", 5000), Type: "t\x00", Payload: body},
		{ID: "evt_4", Payload: body, TwinKey: strings.Repeat("k", 5000)},
		{ID: "evt\x00", Payload: body, ParseError: errors.New("bad payload")},
	}}
	events := d.events()
	require.Len(t, events, 5)
	for _, ev := range events {
		require.Equal(t, "s", ev.Source)
		require.Equal(t, "p", ev.Provider)
		require.Equal(t, body, ev.Body)
		require.Equal(t, headers, ev.Headers)
	}

	require.Equal(t, "evt_1", events[0].EventID)
	require.Equal(t, "t", events[0].EventType)
	require.Equal(t, "k", events[0].TwinKey)
	require.Equal(t, body, events[0].Payload)
	require.Empty(t, events[0].FailReason)

	require.Equal(t, bodyKey+":1", events[1].EventID, "keyed by the body and its place in the batch")
	require.Equal(t, "unparseable delivery: no id", events[1].FailReason)
	require.Nil(t, events[1].Payload)

	require.Equal(t, bodyKey+":2", events[2].EventID)
	require.Equal(t, "unusable event id: it is 5000 bytes, more than 1024", events[2].FailReason)
	require.Nil(t, events[2].Payload)
	require.Equal(t, "t\uFFFD", events[2].EventType)

	require.Equal(t, "evt_4", events[3].EventID)
	require.Empty(t, events[3].TwinKey, "an unindexable twin key is dropped")
	require.Empty(t, events[3].FailReason)

	require.Equal(t, bodyKey+":4", events[4].EventID)
	require.Equal(t, "unparseable delivery: bad payload", events[4].FailReason, "the parse error wins over the id's")

	single := (&Delivery{Body: body, Events: []IncomingEvent{{ParseError: errors.New("bad")}}}).events()
	require.Equal(t, bodyKey, single[0].EventID, "a lone event keeps the plain body key")
}
