package secret

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestString(t *testing.T) {
	t.Parallel()

	const value = "whsec-must-not-leak"
	type holder struct {
		Secret String
		URL    URL
	}
	h := holder{Secret: value, URL: "postgres://app:" + value + "@db/hookinbox"}

	t.Run("NoValueInAnyRendering", func(t *testing.T) {
		t.Parallel()

		js, err := json.Marshal(h)
		require.NoError(t, err)
		var slogOut bytes.Buffer
		slog.New(slog.NewJSONHandler(&slogOut, nil)).Info("h", "secret", h.Secret, "url", h.URL)
		core, logs := observer.New(zapcore.DebugLevel)
		zap.New(core).Info("h", zap.Any("secret", h.Secret), zap.Any("url", h.URL), zap.Any("holder", h))
		zapOut := fmt.Sprint(logs.All()[0].ContextMap())
		for name, out := range map[string]string{
			"%v": fmt.Sprintf("%v", h), "%+v": fmt.Sprintf("%+v", h), "%#v": fmt.Sprintf("%#v", h), "%s": h.Secret.String(),
			"json": string(js), "slog": slogOut.String(), "zap": zapOut,
		} {
			require.NotContains(t, out, value, name)
			require.True(t, strings.Contains(out, Redacted) || strings.Contains(out, "xxxxx"), name)
		}
	})

	t.Run("EmptyShowsUnset", func(t *testing.T) {
		t.Parallel()

		require.Empty(t, String("").String())
		require.Equal(t, value, h.Secret.Reveal())
		require.Equal(t, []string{value, ""}, Reveal([]String{value, ""}))
	})
}
