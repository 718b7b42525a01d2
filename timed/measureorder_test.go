package timed

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
)

// TestMeasureOrder: the slaves that ever answered a measurement come
// first, whatever their names, so that silent slaves under made-up names
// (however many) cannot delay them from being measured.
func TestMeasureOrder(t *testing.T) {
	var st netStatus
	var list []election.Peer
	for i := range 300 {
		list = append(list, election.Peer{Name: fmt.Sprintf("a%03d", i), Addr: netip.AddrPortFrom(netip.MustParseAddr("192.0.2.9"), uint16(1024+i))})
	}
	list = append(list, election.Peer{Name: "n1", Addr: netip.MustParseAddrPort("192.0.2.1:525")},
		election.Peer{Name: "n2", Addr: netip.MustParseAddrPort("192.0.2.2:525")})
	st.setSlaves(list)
	st.slaves["n2"].LastSeen = time.Now()
	st.slaves["n1"].LastSeen = time.Now()
	st.slaves["n1"].Failures = 1 // one lost probe does not send it to the back
	got := st.measureOrder(list)
	var names []string
	for _, p := range got[:3] {
		names = append(names, p.Name)
	}
	if want := []string{"n1", "n2", "a000"}; !slices.Equal(names, want) {
		t.Fatalf("measured first: %v, want %v", names, want)
	}
	if len(got) != len(list) || got[len(got)-1].Name != "a299" {
		t.Fatalf("%d slaves, last %v: want all %d, the silent ones in the machine's order", len(got), got[len(got)-1], len(list))
	}
	if list[0].Name != "a000" {
		t.Fatal("measureOrder changed the machine's list")
	}
}
