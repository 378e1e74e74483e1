package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const destinationSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

func TestLoadDestinations(t *testing.T) {
	t.Parallel()

	t.Run("ReadsRoutesAndDestinations", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
worker:
  outbox:
    relay:
      batch: 50
  destinations:
    billing:
      kind: http
      url: https://billing.example/hooks
      secret: ${BILLING_SECRET}
      rate: 20
    customers:
      kind: nats
      url: nats://127.0.0.1:4222
      stream: STRIPE
      subject: "stripe.{type}"
  routes:
    - source: stripe
      types: ["invoice.*"]
      filter:
        - path: data.object.currency
          in: [usd, eur]
      handlers: [forward]
      destinations: [billing]
    - source: stripe
      types: ["customer.*"]
      handlers: [forward]
      destinations: [customers]
    - source: stripe
      handlers: [noop]
`)
		cfg, err := loadIn(path, everything, map[string]string{"BILLING_SECRET": destinationSecret})
		require.NoError(t, err)
		w := cfg.Worker
		require.False(t, w.Outbox.Relay.Disabled)
		require.Equal(t, 50, w.Outbox.Relay.Batch)
		require.Equal(t, time.Second, w.Outbox.Relay.PollInterval)
		billing := w.Destinations["billing"]
		require.Equal(t, destinationSecret, billing.Secret.Reveal(), "expanded from the environment")
		require.InDelta(t, 20.0, billing.Rate, 0)
		require.Equal(t, 10*time.Second, billing.Timeout)
		require.Equal(t, 8, billing.Concurrency)
		require.Equal(t, "stripe.{type}", w.Destinations["customers"].Subject)
		route := w.Routes[0]
		require.Equal(t, []string{"billing"}, route.Destinations)
		require.Equal(t, "data.object.currency", route.Filter[0].Path)
		require.Equal(t, []string{"usd", "eur"}, route.Filter[0].In)

		require.Contains(t, cfg.SecretValues(), destinationSecret)
		require.NotContains(t, cfg.String(), destinationSecret, "the secret is logged")
		require.Contains(t, cfg.String(), `"customers"`)
	})

	t.Run("ReportsBadDestinationsAndRoutes", func(t *testing.T) {
		t.Parallel()
		path := writeFile(t, "hookinbox.yaml", minimalYAML+`
worker:
  destinations:
    billing:
      kind: http
      url: ftp://billing.example
      secret: not-a-secret
      bogus: 1
    customers:
      kind: nats
    other:
      kind: smtp
      url: x
  routes:
    - source: stripe
      filter:
        - path: ""
      handlers: [forward]
      destinations: [billing, nowhere]
`)
		_, err := loadIn(path, everything, nil)
		require.Error(t, err)
		msg := err.Error()
		for _, want := range []string{
			"worker.destinations.billing.bogus: unknown key",
			"worker.destinations.billing.url: must be an absolute http:// or https:// URL",
			"worker.destinations.billing.secret",
			"worker.destinations.customers.stream: required",
			"worker.destinations.customers.subject: required",
			"worker.destinations.other.kind: must be http or nats",
			"worker.routes[0].filter[0].path",
			`worker.routes[0].destinations[1]: unknown destination "nowhere"`,
		} {
			require.Contains(t, msg, want)
		}
		require.NotContains(t, msg, "not-a-secret")
		require.NotContains(t, msg, "worker.routes[0].destinations[0]")
	})
}
