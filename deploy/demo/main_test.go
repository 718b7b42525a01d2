package main

import (
	"testing"

	"github.com/timed-project/timed/timed/control"
)

// TestOneMaster: the demo prints its table only once there is one master
// and every other daemon follows it; until then it says it is electing.
func TestOneMaster(t *testing.T) {
	master := &control.Status{Hostname: "host1", State: "master"}
	slave := func(name, of string) *control.Status {
		return &control.Status{Hostname: name, State: "slave", Master: &control.Peer{Name: of}}
	}
	for _, c := range []struct {
		name string
		sts  []*control.Status
		want string
	}{
		{"one master, its slaves", []*control.Status{master, slave("host2", "host1"), slave("host3", "host1")}, "host1"},
		{"a daemon not answering", []*control.Status{master, nil, slave("host3", "host1")}, ""},
		{"no master", []*control.Status{slave("host1", ""), {Hostname: "host2", State: "candidate"}}, ""},
		{"two masters", []*control.Status{master, {Hostname: "host2", State: "master"}}, ""},
		{"a slave of another", []*control.Status{master, slave("host2", "host9")}, ""},
		{"a slave without master", []*control.Status{master, {Hostname: "host2", State: "slave"}}, ""},
		{"a candidate", []*control.Status{master, {Hostname: "host2", State: "candidate"}}, ""},
	} {
		got, ok := oneMaster(c.sts)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("%s: %q %v, want %q", c.name, got, ok, c.want)
		}
	}
	if got := states([]*daemon{{name: "host1"}, {name: "host2"}}, []*control.Status{nil, {State: "candidate"}}); got != "host1 starting, host2 candidate" {
		t.Errorf("states %q", got)
	}
}
