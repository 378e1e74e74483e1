package receiver

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/component"
)

func TestParsePrefixes(t *testing.T) {
	t.Parallel()

	prefixes, err := ParsePrefixes("receiver.trusted_proxies", []string{"10.0.0.0/8", "fd00::1"})
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::1/128")}, prefixes)

	_, err = ParsePrefixes("receiver.trusted_proxies", []string{"10.0.0.0/8", "ingress"})
	require.EqualError(t, err, `receiver.trusted_proxies[1]: "ingress" is not a CIDR prefix (10.0.0.0/8) or an IP address`)
}

func TestConfigValidateTrustedProxies(t *testing.T) {
	t.Parallel()

	c := (&Config{ServerConfig: component.ServerConfig{TrustedProxies: []string{"2001:db8::1/32"}}}).WithDefaults()
	require.EqualError(t, c.Validate(), `trusted_proxies[0]: "2001:db8::1/32" has host bits set; write 2001:db8::/32 for the network, or 2001:db8::1/128 for the one host`)
}
