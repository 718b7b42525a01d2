package compose

import (
	"os"
	"strings"
	"testing"
)

// TestCheckedInFile: deploy/docker-compose.yml is the generator's output,
// so the file users run is the network the e2e suite tests.
func TestCheckedInFile(t *testing.T) {
	got, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(Generate(Default(5))) {
		t.Fatal("deploy/docker-compose.yml differs from the generator's output: run go run ./deploy/gen-compose")
	}
}

// TestNoClockPrivilege: every container drops every capability but the
// two timed needs, and every daemon runs on a simulated clock.
func TestNoClockPrivilege(t *testing.T) {
	s := Default(20)
	s.Hosts = append(s.Hosts, Host{Name: "witness", Witness: true})
	out := string(Generate(s))
	n := len(s.Hosts)
	for _, want := range []string{"cap_drop: [ALL]", "cap_add: [NET_BIND_SERVICE, NET_RAW]", "hostname: "} {
		if c := strings.Count(out, want); c != n {
			t.Errorf("%q appears %d times, want %d", want, c, n)
		}
	}
	if strings.Count(out, "cap_add:") != n || strings.Contains(out, "privileged:") || strings.Contains(out, "\"--clock\"\n      - \"system") {
		t.Error("a container may adjust the clock")
	}
	if c := strings.Count(out, `"sim:offset=`); c != n-1 {
		t.Errorf("%d daemons on a simulated clock, want %d", c, n-1)
	}
}

func TestArgs(t *testing.T) {
	h := Host{Name: "a", Offset: 1500, DriftPPM: -3, Trusted: []string{"a", "b"}}
	got := strings.Join(h.Args(), " ")
	for _, want := range []string{"--clock sim:offset=+1us,drift=-3ppm", "--trusted a,b", "--profile fast", "--sync-interval 1s"} {
		if !strings.Contains(got, want) {
			t.Errorf("args %q lack %q", got, want)
		}
	}
	if strings.Contains(got, "-M") {
		t.Errorf("args %q: -F implies -M, no need to pass it", got)
	}
}

// TestMountsAndEntrypoint: a witness may run another program, and any
// host may have bind and tmpfs mounts; the default network has neither.
func TestMountsAndEntrypoint(t *testing.T) {
	s := Spec{Hosts: []Host{
		{Name: "a", Master: true, Mounts: []string{"/tmp/k:/timed.keys:ro"}, Tmpfs: []string{"/state:mode=0700"}},
		{Name: "x", Witness: true, Entrypoint: []string{"/attack", "idle"}, Mounts: []string{"/bin/x:/attack:ro"}},
	}}
	out := string(Generate(s))
	for _, want := range []string{
		"    volumes:\n      - \"/tmp/k:/timed.keys:ro\"\n    tmpfs:\n      - \"/state:mode=0700\"\n",
		"    entrypoint:\n      - \"/attack\"\n      - \"idle\"\n    volumes:\n      - \"/bin/x:/attack:ro\"\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("generated file lacks\n%s\nin\n%s", want, out)
		}
	}
	if strings.Count(out, "stdin_open") != 0 || strings.Count(out, "command:") != 1 {
		t.Errorf("the attacker witness runs timed or the timedc prompt:\n%s", out)
	}
	if d := string(Generate(Default(5))); strings.Contains(d, "volumes:") || strings.Contains(d, "tmpfs:") {
		t.Error("the default network mounts something")
	}
}

// TestDefaultNetworkExplicit: naming the default network, on the spec and
// on every host, changes nothing in the file.
func TestDefaultNetworkExplicit(t *testing.T) {
	s := Default(5)
	s.Networks = []Network{{Name: DefaultNetwork}}
	for i := range s.Hosts {
		s.Hosts[i].Networks = []string{DefaultNetwork}
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if string(Generate(s)) != string(Generate(Default(5))) {
		t.Fatal("the default network named explicitly generates another file")
	}
}

// TestSeveralNetworks: two networks, one with a fixed subnet, hosts on
// one or the other and a gateway on both; every network carries the run
// label, so that a run's cleanup finds it.
func TestSeveralNetworks(t *testing.T) {
	s := Spec{
		Networks: []Network{{Name: "neta", Subnet: "10.213.1.0/24"}, {Name: "netb"}},
		Hosts: []Host{
			{Name: "a1", Master: true},
			{Name: "b1", Master: true, Networks: []string{"netb"}},
			{Name: "g", Master: true, Networks: []string{"neta", "netb"}},
		},
		Run: "r1",
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	if gw := s.Gateways(); len(gw) != 1 || gw[0] != "g" {
		t.Errorf("gateways %v, want [g]", gw)
	}
	out := string(Generate(s))
	for _, want := range []string{
		"# 3 timed daemons on 2 bridge networks (broadcast works on each, so they\n",
		"# Networks: neta (a1, g); netb (b1, g).\n# Gateways, on several: g.\n",
		"  a1:\n", "    networks: [neta]\n", "    networks: [netb]\n", "    networks: [neta, netb]\n",
		"networks:\n  neta:\n    driver: bridge\n    ipam:\n      config:\n        - subnet: \"10.213.1.0/24\"\n    labels:\n      org.timed-project.e2e.run: \"r1\"\n" +
			"  netb:\n    driver: bridge\n    labels:\n      org.timed-project.e2e.run: \"r1\"\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("generated file lacks\n%s\nin\n%s", want, out)
		}
	}
	if c := strings.Count(out, "org.timed-project.e2e.run: \"r1\""); c != len(s.Hosts)+len(s.Networks) {
		t.Errorf("run label %d times, want one per container and network (%d)", c, len(s.Hosts)+len(s.Networks))
	}
	if strings.Contains(out, "tsp") {
		t.Errorf("a spec with networks of its own still has the default one:\n%s", out)
	}
}

// TestIPv6Network: a network with an IPv6 subnet has IPv6 on, and both
// subnets where both are given.
func TestIPv6Network(t *testing.T) {
	s := Spec{Networks: []Network{{Name: "v6", IPv6Subnet: "fd12:3456:789a:1::/64"}, {Name: "both", Subnet: "10.213.1.0/24", IPv6Subnet: "fd12:3456:789a:2::/64"}},
		Hosts: []Host{{Name: "a", Networks: []string{"v6", "both"}}}, Run: "r"}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	out := string(Generate(s))
	for _, want := range []string{
		"  v6:\n    driver: bridge\n    enable_ipv6: true\n    ipam:\n      config:\n        - subnet: \"fd12:3456:789a:1::/64\"\n    labels:",
		"  both:\n    driver: bridge\n    enable_ipv6: true\n    ipam:\n      config:\n        - subnet: \"10.213.1.0/24\"\n        - subnet: \"fd12:3456:789a:2::/64\"\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("generated file lacks\n%s\nin\n%s", want, out)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"unknown network", Spec{Hosts: []Host{{Name: "a", Networks: []string{"x"}}}}, `no network "x"`},
		{"twice on one", Spec{Networks: []Network{{Name: "x"}}, Hosts: []Host{{Name: "a", Networks: []string{"x", "x"}}}}, "twice"},
		{"network twice", Spec{Networks: []Network{{Name: "x"}, {Name: "x"}}}, "listed twice"},
		{"host twice", Spec{Hosts: []Host{{Name: "a"}, {Name: "a"}}}, "listed twice"},
		{"bad name", Spec{Networks: []Network{{Name: "1x"}}}, "the name must be"},
		{"bad subnet", Spec{Networks: []Network{{Name: "x", Subnet: "10.1.1.1/24"}}}, "not an IPv4 network"},
		{"ipv6 subnet", Spec{Networks: []Network{{Name: "x", Subnet: "fd00::/64"}}}, "not an IPv4 network"},
		{"overlap", Spec{Networks: []Network{{Name: "x", Subnet: "10.1.0.0/16"}, {Name: "y", Subnet: "10.1.2.0/24"}}}, "overlaps"},
		{"IPv4 as IPv6 subnet", Spec{Networks: []Network{{Name: "x", IPv6Subnet: "10.1.0.0/16"}}}, "not an IPv6 network"},
		{"IPv6 subnet not masked", Spec{Networks: []Network{{Name: "x", IPv6Subnet: "fd00::1/64"}}}, "not an IPv6 network"},
	} {
		err := tc.spec.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check() = %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	if err := Default(20).Check(); err != nil {
		t.Errorf("Default(20): %v", err)
	}
}
