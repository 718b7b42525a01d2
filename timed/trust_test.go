package timed

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestResolveTrusted: -F entries become the addresses the machine
// matches sources against; a port narrows one to one daemon (peers mode),
// and a bad entry is an error naming the key.
func TestResolveTrusted(t *testing.T) {
	got, unresolved, err := resolveTrusted(context.Background(), []string{"192.0.2.7", "127.0.0.1:15250", "localhost"})
	if err != nil || len(unresolved) != 0 {
		t.Fatal(err, unresolved)
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
	for _, bad := range []string{"127.0.0.1:99999", "127.0.0.1:0", ":525", "a b"} {
		if _, _, err := resolveTrusted(context.Background(), []string{bad}); err == nil || !strings.Contains(err.Error(), "trusted") {
			t.Errorf("%q: %v, want an error naming trusted", bad, err)
		}
	}
	if got, _, _ := resolveTrusted(context.Background(), nil); got != nil {
		t.Fatalf("no list: %v, want nil (trust everyone)", got)
	}
}
