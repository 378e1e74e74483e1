package receiver

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ParsePrefix parses an allow_ips or trusted_proxies entry: a CIDR prefix
// with no host bits set, or a bare IP address meaning that host alone (/32
// or /128). It refuses what would silently match other addresses than the
// operator meant: host bits ("10.0.0.1/8" allows all of 10.0.0.0/8), zones,
// and IPv4-mapped IPv6, which never matches because the receiver compares
// unmapped client addresses.
func ParsePrefix(entry string) (netip.Prefix, error) {
	var prefix netip.Prefix
	if strings.Contains(entry, "/") {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix (10.0.0.0/8) or an IP address", entry)
		}
		prefix = p
	} else {
		addr, err := netip.ParseAddr(entry)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR prefix (10.0.0.0/8) or an IP address", entry)
		}
		if addr.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q: an IP address with a zone cannot be matched", entry)
		}
		prefix = netip.PrefixFrom(addr, addr.BitLen())
	}
	if prefix.Addr().Is4In6() {
		hint := ""
		if prefix.Bits() >= 96 {
			hint = fmt.Sprintf(" (%s/%d)", prefix.Addr().Unmap(), prefix.Bits()-96)
		}
		return netip.Prefix{}, fmt.Errorf("%q is IPv4-mapped IPv6, which never matches a client; write it as IPv4%s", entry, hint)
	}
	if masked := prefix.Masked(); masked != prefix {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; write %s for the network, or %s for the one host",
			entry, masked, netip.PrefixFrom(prefix.Addr(), prefix.Addr().BitLen()))
	}
	return prefix, nil
}

// ParsePrefixes parses entries with ParsePrefix, naming each bad one as
// key[i].
func ParsePrefixes(key string, entries []string) ([]netip.Prefix, error) {
	var (
		prefixes []netip.Prefix
		errs     []error
	)
	for i, entry := range entries {
		prefix, err := ParsePrefix(entry)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %w", key, i, err))
			continue
		}
		prefixes = append(prefixes, prefix)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return prefixes, nil
}
