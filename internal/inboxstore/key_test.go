package inboxstore

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCheckKey(t *testing.T) {
	t.Parallel()
	require.NoError(t, checkKey("evt_1"))
	require.NoError(t, checkKey(strings.Repeat("é", maxKeyBytes/2)))
	for key, why := range map[string]string{
		"":                                 "is empty",
		strings.Repeat("x", maxKeyBytes+1): "more than",
		"evt\xff":                          "UTF-8",
		"evt\x00":                          "NUL",
	} {
		require.ErrorContains(t, checkKey(key), why)
	}
}

func TestCleanText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "order.created", cleanText("order.created"))
	require.Equal(t, "a\uFFFDb\uFFFDc", cleanText("a\x00b\xffc"))
	long := cleanText(strings.Repeat("é", maxKeyBytes))
	require.LessOrEqual(t, len(long), maxKeyBytes)
	require.True(t, utf8.ValidString(long))
}
