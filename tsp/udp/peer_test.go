package udp

import (
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// loName is this host's loopback interface, the one zone every host has.
func loName(t testing.TB) (string, int) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name, i.Index
		}
	}
	t.Fatal("no loopback interface")
	return "", 0
}

func TestParsePeer(t *testing.T) {
	lo, idx := loName(t)
	for _, tc := range []struct {
		in, addr, host string
	}{
		{"127.0.0.1:525", "127.0.0.1:525", ""},
		{"[::1]:525", "[::1]:525", ""},
		{"[2001:db8::1]:15250", "[2001:db8::1]:15250", ""},
		{"[::ffff:10.0.0.1]:525", "10.0.0.1:525", ""},
		{"[fe80::1%" + lo + "]:525", "[fe80::1%" + lo + "]:525", ""},
		{"[fe80::1%" + strconv.Itoa(idx) + "]:525", "[fe80::1%" + lo + "]:525", ""}, // an index becomes the name
		{"timehost1:525", "", "timehost1"},
	} {
		a, h, err := ParsePeer(tc.in)
		if err != nil {
			t.Errorf("%s: %v", tc.in, err)
			continue
		}
		if tc.addr != "" && a != netip.MustParseAddrPort(tc.addr) || tc.addr == "" && a.IsValid() || h != tc.host {
			t.Errorf("%s: %v %q, want %s %q", tc.in, a, h, tc.addr, tc.host)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"2001:db8::1:525", "goes in brackets"},
		{"[2001:db8::1:525", "missing ']'"},
		{"[2001:db8::1]", "missing the port"},
		{"[2001:db8::1]525", "missing the port"},
		{"timehost1", "missing the port"},
		{"[::1]:0", "accepted: 1-65535"},
		{"[::1]:65536", "accepted: 1-65535"},
		{"[::1]:http", "accepted: 1-65535"},
		{":525", "no host"},
		{"[fe80::1]:525", "needs its interface"},
		{"[fe80::1%nosuchif0]:525", `unknown zone "nosuchif0"`},
		{"[fe80::1%99999]:525", `unknown zone "99999"`},
		{"[2001:db8::1%" + lo + "]:525", "only a link-local address"},
		{"[ff02::20d]:525", "not a unicast"},
		{"[::]:525", "not a unicast"},
		{"[a%b]:525", "neither an address nor a host name"},
	} {
		_, _, err := ParsePeer(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to say %q", tc.in, err, tc.want)
		}
	}
	if _, _, err := ParsePeer("[fe80::1%nosuchif0]:525"); !errors.Is(err, errZone) {
		t.Errorf("zone error does not wrap errZone: %v", err)
	}
}

// FuzzParsePeer: no input panics; an address accepted is printed back as
// an entry that parses to the same address.
func FuzzParsePeer(f *testing.F) {
	lo, _ := loName(f)
	for _, s := range []string{"127.0.0.1:525", "[::1]:525", "[fe80::1%" + lo + "]:525", "[fe80::1%1]:9", "h:1", "[::1", "[", "]:", "[%]:1", "1:2:3", "[::ffff:1.2.3.4]:5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, h, err := ParsePeer(s)
		switch {
		case err != nil:
			if a.IsValid() || h != "" {
				t.Fatalf("%q: error %v with a result %v %q", s, err, a, h)
			}
		case a.IsValid():
			if h != "" || a.Port() == 0 {
				t.Fatalf("%q: %v and %q", s, a, h)
			}
			b, _, err := ParsePeer(a.String())
			if err != nil || b != a {
				t.Fatalf("%q: %v printed as %q parses to %v, %v", s, a, a.String(), b, err)
			}
		case h == "" || strings.ContainsAny(h, ":%[]"):
			t.Fatalf("%q: host %q", s, h)
		}
	})
}
