package main

import (
	"testing"

	"github.com/timed-project/timed/timed/control"
)

// TestNetworkLine: a network's line ends with the daemon's role there
// (state, master, slaves, slavenet), and says nothing more for a daemon
// that reports none.
func TestNetworkLine(t *testing.T) {
	a1 := &control.Peer{Name: "a1", Address: "10.0.0.1:525"}
	const where = "peers, listening on 0.0.0.0:525"
	for _, c := range []struct {
		n    control.Network
		want string
	}{
		{control.Network{}, where},
		{control.Network{State: "slave", Master: a1, Slavenet: true}, where + ": slave, master a1 (10.0.0.1:525), slavenet"},
		{control.Network{State: "master", Master: &control.Peer{Name: "gw"}, Slaves: make([]control.Slave, 2)}, where + ": master of 2 slaves"},
		{control.Network{State: "master", Slaves: make([]control.Slave, 3), RoundIntervalSecs: 64}, where + ": master of 3 slaves, a round every 1m4s"},
		{control.Network{State: "ignore"}, where + ": ignore"},
		{control.Network{State: "candidate"}, where + ": candidate"},
	} {
		c.n.Address = "0.0.0.0:525"
		if got := networkLine(c.n); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
	v6 := control.Network{Interface: "eth0", Address: "fe80::1%eth0", Prefix: "2001:db8::/64", Group: "ff02::20d",
		Note: "IPv6: probe only, no BSD daemons", State: "master", Slaves: make([]control.Slave, 3)}
	if got, want := networkLine(v6), "eth0 fe80::1%eth0 on 2001:db8::/64, group ff02::20d (IPv6: probe only, no BSD daemons): master of 3 slaves"; got != want {
		t.Errorf("IPv6 link: %q, want %q", got, want)
	}
	v6.State, v6.Slaves, v6.Link = "ignore", nil, "IPv6 side of dual-stack eth0, with 10.0.0.5"
	if got, want := networkLine(v6), "eth0 fe80::1%eth0 on 2001:db8::/64, group ff02::20d (IPv6: probe only, no BSD daemons): ignore [IPv6 side of dual-stack eth0, with 10.0.0.5]"; got != want {
		t.Errorf("IPv6 side of a dual-stack link: %q, want %q", got, want)
	}
}
