package timed

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestResolveTrusted: -F entries become the addresses the machine
// matches sources against; a port narrows one to one daemon (peers mode),
// and a bad entry is an error naming the key.
func TestResolveTrusted(t *testing.T) {
	got, err := resolveTrusted([]string{"192.0.2.7", "127.0.0.1:15250", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []netip.AddrPort{
		netip.MustParseAddrPort("192.0.2.7:0"),
		netip.MustParseAddrPort("127.0.0.1:15250"),
		netip.MustParseAddrPort("127.0.0.1:0"),
	} {
		if !slices.Contains(got, want) {
			t.Errorf("resolved %v, missing %v", got, want)
		}
	}
	if _, err := resolveTrusted([]string{"127.0.0.1:99999"}); err == nil || !strings.Contains(err.Error(), "trusted") {
		t.Fatalf("bad port: %v", err)
	}
}
