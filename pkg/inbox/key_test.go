package inbox_test

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

func TestCheckKey(t *testing.T) {
	t.Parallel()
	require.NoError(t, inbox.CheckKey("evt_1"))
	require.NoError(t, inbox.CheckKey(strings.Repeat("é", inbox.MaxKeyBytes/2)))
	for key, why := range map[string]string{
		"":                                       "is empty",
		strings.Repeat("x", inbox.MaxKeyBytes+1): "more than",
		"evt\xff":                                "UTF-8",
		"evt\x00":                                "NUL",
	} {
		require.ErrorContains(t, inbox.CheckKey(key), why)
	}
}

func TestCleanText(t *testing.T) {
	t.Parallel()
	require.Equal(t, "order.created", inbox.CleanText("order.created"))
	require.Equal(t, "a\uFFFDb\uFFFDc", inbox.CleanText("a\x00b\xffc"))
	long := inbox.CleanText(strings.Repeat("é", inbox.MaxKeyBytes))
	require.LessOrEqual(t, len(long), inbox.MaxKeyBytes)
	require.True(t, utf8.ValidString(long))
}
