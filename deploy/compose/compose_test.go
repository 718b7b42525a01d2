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
