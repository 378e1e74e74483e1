package daemon_test

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

func TestNewSource(t *testing.T) {
	t.Parallel()

	setup := func() *config.SourceConfig {
		cfg := &config.Config{Sources: []config.SourceConfig{{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret}}}}
		cfg.ApplyDefaults()
		return &cfg.Sources[0]
	}

	t.Run("CarriesLimitsAndAllowedNetworks", func(t *testing.T) {
		t.Parallel()

		sc := setup()
		sc.AllowIPs = []string{"10.0.0.0/8", "203.0.113.7", "2001:db8::1"}
		src, err := daemon.NewSource(sc)
		require.NoError(t, err)
		require.Equal(t, "bank", src.Name)
		require.Equal(t, "standardwebhooks", src.Provider)
		require.NotNil(t, src.Verifier)
		require.Equal(t, sc.MaxBodyBytes, src.MaxBodyBytes)
		require.Equal(t, sc.AckTimeout, src.AckTimeout)
		require.Equal(t, []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("203.0.113.7/32"),
			netip.MustParsePrefix("2001:db8::1/128"),
		}, src.AllowIPs)
	})

	t.Run("BadAllowIPsEntryIsNamed", func(t *testing.T) {
		t.Parallel()

		sc := setup()
		sc.AllowIPs = []string{"203.0.113.7/24"}
		_, err := daemon.NewSource(sc)
		require.ErrorContains(t, err, `allow_ips[0]: "203.0.113.7/24" has host bits set`)
	})

	t.Run("ProviderRefusalIsReturned", func(t *testing.T) {
		t.Parallel()

		sc := setup()
		sc.Secrets = nil
		_, err := daemon.NewSource(sc)
		require.ErrorContains(t, err, "standardwebhooks: secrets: at least one is required")
	})
}

// TestReceiverTrustedProxies checks that receiver.trusted_proxies reaches the
// receiver: X-Forwarded-For decides allow_ips only when the peer is trusted.
func TestReceiverTrustedProxies(t *testing.T) {
	t.Parallel()

	db := dbtest.New(t)
	serve := func(t *testing.T, trusted []string) string {
		t.Helper()
		cfg := &config.Config{
			Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
			Receiver: config.ReceiverConfig{ServerConfig: component.ServerConfig{TrustedProxies: trusted}},
			Sources: []config.SourceConfig{{
				Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret},
				AllowIPs: []string{"203.0.113.0/24"},
			}},
		}
		cfg.ApplyDefaults()
		require.NoError(t, cfg.Validate())
		srv, stop, err := daemon.NewReceiver(&daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool})
		require.NoError(t, err)
		t.Cleanup(stop) // runs after serveReceiver's shutdown: cleanups run last-in, first-out
		return serveReceiver(t, srv)
	}
	post := func(t *testing.T, url, eventID, forwardedFor string) int {
		t.Helper()
		body := `{"type":"account.deposit","data":{"account_id":"acc_1"}}`
		header, err := webhook.Headers(&webhook.Params{
			Provider: "standardwebhooks", Secret: secret, EventID: eventID, Time: time.Now(), Body: []byte(body),
		})
		require.NoError(t, err)
		if forwardedFor != "" {
			header.Set("X-Forwarded-For", forwardedFor)
		}
		req, err := http.NewRequest(http.MethodPost, url+"/webhooks/bank", strings.NewReader(body))
		require.NoError(t, err)
		req.Header = header
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("TrustedProxyForwardsTheClient", func(t *testing.T) {
		t.Parallel()

		url := serve(t, []string{"127.0.0.0/8", "::1"})
		require.Equal(t, http.StatusOK, post(t, url, "msg_trusted", "203.0.113.9"))
		require.Equal(t, http.StatusForbidden, post(t, url, "msg_outsider", "198.51.100.1"))
		require.Equal(t, http.StatusForbidden, post(t, url, "msg_direct", ""), "the loopback peer itself is not allowed")
	})

	t.Run("UntrustedPeerCannotForward", func(t *testing.T) {
		t.Parallel()

		url := serve(t, nil)
		require.Equal(t, http.StatusForbidden, post(t, url, "msg_spoofed", "203.0.113.9"))
	})
}

func TestNewReceiverRefusesBadTrustedProxies(t *testing.T) {
	t.Parallel()

	db := dbtest.New(t)
	cfg := &config.Config{
		Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
		Receiver: config.ReceiverConfig{ServerConfig: component.ServerConfig{TrustedProxies: []string{"ingress"}}},
		Sources:  []config.SourceConfig{{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret}}},
	}
	cfg.ApplyDefaults()
	_, _, err := daemon.NewReceiver(&daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool})
	require.ErrorContains(t, err, `trusted_proxies[0]: "ingress" is not a CIDR prefix`)
}
