package rejection

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRedactor(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	r := NewRedactor([]string{secret, ""})
	h := http.Header{
		"Stripe-Signature":      {"t=1,v1=abc"},
		"X-Shopify-Hmac-Sha256": {"abc="},
		"Authorization":         {"Bearer xyz"},
		"Cookie":                {"a=b"},
		"X-Api-Key":             {"k"},
		"X-Note":                {"contains " + secret},
		"X-Note-B64":            {base64.StdEncoding.EncodeToString([]byte(secret))},
		"User-Agent":            {"Stripe/1.0"},
		"X-Long":                {strings.Repeat("é", 400)},
	}
	out := r.Headers(h)
	for _, name := range []string{"Stripe-Signature", "X-Shopify-Hmac-Sha256", "Authorization", "Cookie", "X-Api-Key", "X-Note", "X-Note-B64"} {
		require.True(t, strings.HasPrefix(out[name], "[redacted, "), name)
	}
	require.Equal(t, "Stripe/1.0", out["User-Agent"])
	require.LessOrEqual(t, len(out["X-Long"]), maxHeaderValue+len("…"))
	require.True(t, strings.HasSuffix(out["X-Long"], "…"))

	many := http.Header{}
	for i := range 100 {
		many.Set("X-H"+strings.Repeat("a", i), "v")
	}
	require.Len(t, r.Headers(many), maxHeaders+1, "64 headers and a note of how many were left out")
}

func TestBucket(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_700_000_000, 0)
	b := &bucket{tokens: 3}
	taken := 0
	for range 100 {
		if b.take(start, 3, 10*time.Second) {
			taken++
		}
	}
	require.Equal(t, 3, taken, "the burst, then nothing at the same instant")
	require.False(t, b.take(start.Add(9*time.Second), 3, 10*time.Second))
	require.True(t, b.take(start.Add(10*time.Second), 3, 10*time.Second), "one more per interval")
	require.False(t, b.take(start.Add(10*time.Second), 3, 10*time.Second))
	require.True(t, b.take(start.Add(time.Hour), 3, 10*time.Second))
	require.True(t, b.take(start.Add(time.Hour), 3, 10*time.Second))
	require.True(t, b.take(start.Add(time.Hour), 3, 10*time.Second))
	require.False(t, b.take(start.Add(time.Hour), 3, 10*time.Second), "refill is capped at the burst")
}
