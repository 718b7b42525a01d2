package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// Mode is the authentication policy, the auth setting.
type Mode uint8

const (
	// Off signs nothing and checks nothing: BSD's behaviour, the default.
	// A trailer on a received datagram is cut off unread, so that packets
	// from signing hosts still decode during a roll-out.
	Off Mode = iota
	// Optional signs every datagram sent. A received datagram without a
	// trailer is accepted only from an unsigned peer (UnsignedPeers: the
	// BSD hosts); one with a trailer must verify, from anyone.
	Optional
	// Required signs every datagram sent and drops every received one
	// that is unsigned or does not verify.
	Required
)

var modeNames = [...]string{Off: "off", Optional: "optional", Required: "required"}

func (m Mode) String() string {
	if int(m) < len(modeNames) {
		return modeNames[m]
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ErrBadMode is wrapped by ParseMode's error.
var ErrBadMode = errors.New("bad auth mode")

// ParseMode reads off, optional or required (any case).
func ParseMode(s string) (Mode, error) {
	for i, n := range modeNames {
		if strings.EqualFold(s, n) {
			return Mode(i), nil
		}
	}
	return Off, fmt.Errorf("%w %q: accept off, optional or required", ErrBadMode, s)
}

// MarshalText and UnmarshalText let a Mode be a configuration value.
func (m Mode) MarshalText() ([]byte, error) {
	if int(m) >= len(modeNames) {
		return nil, fmt.Errorf("%w: %v", ErrBadMode, m)
	}
	return []byte(m.String()), nil
}

func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Signs reports whether the mode signs what is sent.
func (m Mode) Signs() bool { return m == Optional || m == Required }

// ParsePeer reads one unsigned-peers entry: an address (10.0.0.5, a
// prefix of one address) or a CIDR prefix (10.0.0.0/24, masked). IPv4
// addresses mapped into IPv6 are unmapped.
func ParsePeer(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("unsigned peer: %w: accept an address or a CIDR prefix such as 192.0.2.0/24", err)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("unsigned peer: %w: accept an address or a CIDR prefix such as 192.0.2.0/24", err)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}
