package receiver

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/provider"
)

func TestNewEvents(t *testing.T) {
	t.Parallel()
	src := &Source{Name: "s", Provider: "p"}
	body := []byte(`{"a":1}`)
	sum := sha256.Sum256(body)
	bodyKey := "sha256:" + hex.EncodeToString(sum[:])

	events := newEvents(src, body, &provider.Delivery{Events: []provider.Event{
		{ID: "evt_1", Type: "t", Payload: body, TwinKey: "k"},
		{ID: "", ParseError: errors.New("no id")},
		{ID: strings.Repeat("x", 5000), Type: "t\x00", Payload: body},
		{ID: "evt_4", Payload: body, TwinKey: strings.Repeat("k", 5000)},
	}})
	require.Len(t, events, 4)

	require.Equal(t, "evt_1", events[0].EventID)
	require.Equal(t, "k", events[0].TwinKey)
	require.Empty(t, events[0].FailReason)

	require.Equal(t, bodyKey+":1", events[1].EventID, "keyed by the body and its place in the batch")
	require.Equal(t, "unparseable delivery: no id", events[1].FailReason)

	require.Equal(t, bodyKey+":2", events[2].EventID)
	require.Contains(t, events[2].FailReason, "unusable event id")
	require.Nil(t, events[2].Payload)
	require.Equal(t, "t\uFFFD", events[2].EventType)

	require.Equal(t, "evt_4", events[3].EventID)
	require.Empty(t, events[3].TwinKey, "an unindexable twin key is dropped")

	single := newEvents(src, body, &provider.Delivery{Events: []provider.Event{{ParseError: errors.New("bad")}}})
	require.Equal(t, bodyKey, single[0].EventID, "a lone event keeps the plain body key")
}
