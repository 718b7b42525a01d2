package main

import (
	"testing"

	"github.com/timed-project/timed/timed/control"
)

// TestNetworkRole: a network's line ends with the daemon's role there, and
// says nothing for a daemon that reports none.
func TestNetworkRole(t *testing.T) {
	a1 := &control.Peer{Name: "a1", Address: "10.0.0.1:525"}
	for _, c := range []struct {
		n    control.Network
		want string
	}{
		{control.Network{}, ""},
		{control.Network{State: "slave", Master: a1, Slavenet: true}, ": slave of a1 (10.0.0.1:525), slavenet"},
		{control.Network{State: "master", Master: &control.Peer{Name: "gw"}, Slaves: make([]control.Slave, 2)}, ": master, 2 slaves"},
		{control.Network{State: "ignore"}, ": ignore"},
		{control.Network{State: "candidate"}, ": candidate"},
	} {
		if got := networkRole(c.n); got != c.want {
			t.Errorf("%+v: %q, want %q", c.n, got, c.want)
		}
	}
}
