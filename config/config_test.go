package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp/udp"
)

// load parses args as the daemon would and loads with the given file
// content (none if empty).
func load(t *testing.T, file string, args ...string) (*Config, *pflag.FlagSet, error) {
	t.Helper()
	fs := pflag.NewFlagSet("timed", pflag.ContinueOnError)
	AddFlags(fs)
	path := filepath.Join(t.TempDir(), "timed.yaml")
	if file != "" {
		if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A missing file at a path we did not ask for explicitly is fine.
	if err := fs.Set("config", path); err != nil {
		t.Fatal(err)
	}
	if file == "" {
		fs.Lookup("config").Changed = false
	}
	if err := fs.Parse(args); err != nil {
		return nil, fs, err
	}
	c, err := Load(fs)
	return c, fs, err
}

func TestDefaultsAreBSD(t *testing.T) {
	c, _, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 525 || c.MayBeMaster || c.Clock != "system" || c.LogFormat != "text" {
		t.Fatalf("defaults: %+v", c)
	}
	want := election.DefaultConfig("")
	want.MayBeMaster = false
	want.JoinSync = c.Sync.IntervalFloor // adaptive rounds, on by default (TestAdaptiveRoundDefaults)
	if !reflect.DeepEqual(c.Election, want) {
		t.Fatalf("timers %+v, want BSD's %+v", c.Election, want)
	}
	if c.Sync.StepThreshold != 20*time.Second || c.Sync.MaxStep != 1000*time.Second || !c.Sync.FrequencyDiscipline {
		t.Fatalf("sync %+v", c.Sync)
	}
}

func TestPrecedence(t *testing.T) {
	file := "sync-interval: 60s\nport: 1525\nlog-format: json\ncandidate-wait: 2s\n"
	t.Setenv("TIMED_SYNC_INTERVAL", "90s")
	t.Setenv("TIMED_PORT", "2525")
	c, fs, err := load(t, file, "--port", "3525")
	if err != nil {
		t.Fatal(err)
	}
	if c.Port != 3525 {
		t.Errorf("port %d: flag must win over env and file", c.Port)
	}
	if c.Election.SyncInterval != 90*time.Second {
		t.Errorf("sync-interval %v: env must win over file", c.Election.SyncInterval)
	}
	if c.LogFormat != "json" || c.Election.CandidateWait != 2*time.Second {
		t.Errorf("file values not used: %q %v", c.LogFormat, c.Election.CandidateWait)
	}
	if c.Election.AcceptWindow != 30*time.Second {
		t.Errorf("accept-window %v: default must remain", c.Election.AcceptWindow)
	}
	sources := map[string]string{}
	for _, s := range Effective(fs, c) {
		sources[s.Key] = s.Source + "=" + s.Value
	}
	for key, want := range map[string]string{"port": "flag=3525", "sync-interval": "env=1m30s",
		"log-format": "file=json", "accept-window": "default=30s"} {
		if sources[key] != want {
			t.Errorf("Effective %s = %q, want %q", key, sources[key], want)
		}
	}
}

func TestBSDShortOptions(t *testing.T) {
	c, _, err := load(t, "", "-F", "alpha,beta", "-n", "192.0.2.0/24", "-t", "-d")
	if err != nil {
		t.Fatal(err)
	}
	if !c.MayBeMaster {
		t.Error("-F must imply -M")
	}
	if strings.Join(c.Trusted, " ") != "alpha beta" {
		t.Errorf("trusted %v", c.Trusted)
	}
	if len(c.Networks) != 1 || c.Networks[0] != netip.MustParsePrefix("192.0.2.0/24") {
		t.Errorf("networks %v", c.Networks)
	}
	if !c.Trace || !c.Debug || c.LogLevel.String() != "debug" {
		t.Errorf("-t -d: trace=%v debug=%v level=%v", c.Trace, c.Debug, c.LogLevel)
	}
}

func TestFastProfileOverridable(t *testing.T) {
	c, _, err := load(t, "", "--profile", "fast", "--sync-interval", "2s")
	if err != nil {
		t.Fatal(err)
	}
	fast := election.FastConfig("")
	if c.Election.SyncInterval != 2*time.Second || c.Election.ElectionMin != fast.ElectionMin || c.Election.CandidateWait != fast.CandidateWait {
		t.Fatalf("fast profile: %+v", c.Election)
	}
	c, _, err = load(t, "", "--ack-timeout", "50ms")
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Election.Retransmit; len(r) != 5 || r[0] != 50*time.Millisecond || r[4] != 800*time.Millisecond {
		t.Fatalf("ack-timeout 50ms: schedule %v, want 50ms doubling to 800ms", r)
	}
}

// TestIPv6Values: IPv6 prefixes (a bare address as its /128), bracketed
// and zoned peers, the family and the group are accepted.
func TestIPv6Values(t *testing.T) {
	c, _, err := load(t, "", "-n", "2001:db8::/32,fd00::1", "--peers", "[::1]:15250,[2001:db8::1]:525,127.0.0.1:15251", "--family", "ipv6", "--ipv6-group", "ff02::1:7")
	if err != nil {
		t.Fatal(err)
	}
	if want := []netip.Prefix{netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("fd00::1/128")}; !slices.Equal(c.Networks, want) {
		t.Errorf("networks = %v", c.Networks)
	}
	if len(c.Peers) != 3 || c.Family != udp.FamilyIPv6 || c.IPv6Group != netip.MustParseAddr("ff02::1:7") {
		t.Errorf("peers %v family %v group %v", c.Peers, c.Family, c.IPv6Group)
	}
	c, _, err = load(t, "")
	if err != nil || c.Family != udp.FamilyAuto || c.IPv6Group != udp.DefaultGroup {
		t.Errorf("defaults: family %v group %v, %v", c.Family, c.IPv6Group, err)
	}
}

// Adaptive rounds: on by default (floor 8 s under BSD's 240 s ceiling),
// fixed with the fast profile (floor = its 4 s), and an unset floor
// follows a shorter sync-interval down instead of failing.
func TestAdaptiveRoundDefaults(t *testing.T) {
	for _, c := range []struct {
		args         []string
		floor, ceil  time.Duration
		target       time.Duration
		derivedFloor bool
	}{
		{nil, 8 * time.Second, 240 * time.Second, 20 * time.Microsecond, false},
		{[]string{"--profile", "fast"}, 4 * time.Second, 4 * time.Second, 20 * time.Microsecond, false},
		{[]string{"--profile", "fast", "--sync-interval", "10s"}, 10 * time.Second, 10 * time.Second, 20 * time.Microsecond, true},
		{[]string{"--sync-interval", "5s"}, 5 * time.Second, 5 * time.Second, 20 * time.Microsecond, true},
		{[]string{"--sync-interval", "500s", "--sync-target", "50us"}, 8 * time.Second, 500 * time.Second, 50 * time.Microsecond, false},
		{[]string{"--sync-interval-min", "240s"}, 240 * time.Second, 240 * time.Second, 20 * time.Microsecond, false},
	} {
		cfg, fs, err := load(t, "", c.args...)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		join := c.floor
		if c.floor == c.ceil {
			join = 0
		}
		if cfg.Election.JoinSync != join {
			t.Errorf("%v: JoinSync %v, want %v (the floor of adaptive rounds)", c.args, cfg.Election.JoinSync, join)
		}
		if cfg.Sync.IntervalFloor != c.floor || cfg.Election.SyncInterval != c.ceil || cfg.Sync.IntervalTarget != c.target {
			t.Errorf("%v: floor %v, sync-interval %v, target %v; want %v, %v, %v", c.args,
				cfg.Sync.IntervalFloor, cfg.Election.SyncInterval, cfg.Sync.IntervalTarget, c.floor, c.ceil, c.target)
		}
		for _, s := range Effective(fs, cfg) {
			if s.Key == "sync-interval-min" && (s.Source == "derived") != c.derivedFloor {
				t.Errorf("%v: sync-interval-min %+v, derived %v", c.args, s, c.derivedFloor)
			}
		}
	}
}

func TestBadValuesNameKeyValueAndRange(t *testing.T) {
	cases := []struct {
		args []string
		file string
		want string
	}{
		{[]string{"--port", "70000"}, "", `invalid port "70000": accepted: an integer from 1 to 65535`},
		{[]string{"--sync-interval", "soon"}, "", `invalid sync-interval "soon": accepted: a Go duration from 100ms to 24h0m0s`},
		{[]string{"--candidate-wait", "2h"}, "", `invalid candidate-wait "2h": accepted: a Go duration from 1ms to 1h0m0s`},
		{[]string{"-n", "192.0.2.0/24", "-i", "198.51.100.0/24"}, "", "not both"},
		{[]string{"-n", "2001:db8::/32x"}, "", `invalid networks "2001:db8::/32x": accepted: IPv4 or IPv6 networks in CIDR form`},
		{[]string{"-i", "fe80::1%eth0"}, "", `invalid ignore-networks "fe80::1%eth0"`},
		{[]string{"-n", "::ffff:10.0.0.0/104"}, "", "not IPv4-mapped"},
		{[]string{"--peers", "2001:db8::1:525"}, "", `an IPv6 address goes in brackets`},
		{[]string{"--peers", "[2001:db8::1:525"}, "", `missing ']'`},
		{[]string{"--peers", "[fe80::1%nosuchif0]:525"}, "", `unknown zone "nosuchif0"`},
		{[]string{"--peers", "[fe80::1]:525"}, "", `needs its interface`},
		{[]string{"--family", "inet6"}, "", `invalid family "inet6": accepted: auto, ipv4, ipv6 or both`},
		{[]string{"--ipv6-group", "ff05::20d"}, "", `invalid ipv6-group "ff05::20d": accepted: an IPv6 link-local multicast address`},
		{[]string{"--log-level", "loud"}, "", `invalid log-level "loud"`},
		{[]string{"--log-format", "xml"}, "", `invalid log-format "xml": accepted: text or json`},
		{[]string{"--clock", "atomic"}, "", `invalid clock "atomic"`},
		{[]string{"--peers", "127.0.0.1"}, "", `invalid peers "127.0.0.1"`},
		{[]string{"--profile", "turbo"}, "", `invalid profile "turbo": accepted: bsd or fast`},
		{[]string{"--election-timeout-min", "20m", "--election-timeout-max", "15m"}, "", `invalid election-timeout-max "15m": accepted: more than election-timeout-min (20m0s)`},
		{[]string{"--election-timeout-min", "100s", "--sync-interval", "100s"}, "", `invalid election-timeout-min "100s": accepted: more than sync-interval (1m40s)`},
		{nil, "port: many\n", `invalid port "many"`},
		{nil, "frequency-discipline: maybe\n", `invalid frequency-discipline "maybe": accepted: true or false`},
		{[]string{"--max-source-influence", "-1ms"}, "", `invalid max-source-influence "-1ms": accepted: a Go duration from 0s to 24h0m0s`},
		{[]string{"--reference", "chrony"}, "", `invalid reference "chrony": accepted: kernel or off`},
		{[]string{"--reference", "kernel", "--clock", "dry-run"}, "", `invalid reference "kernel": accepted: off unless clock is system`},
		{nil, "reference: gps\n", `invalid reference "gps": accepted: kernel or off`},
		{[]string{"--reference-max-error", "20s"}, "", `invalid reference-max-error "20s": accepted: a Go duration from 1ms to 16s`},
		{[]string{"--reference-hold", "-1s"}, "", `invalid reference-hold "-1s": accepted: a Go duration from 0s to 24h0m0s`},
		{[]string{"--sync-interval-min", "500ms"}, "", `invalid sync-interval-min "500ms": accepted: a Go duration from 1s to 24h0m0s`},
		{[]string{"--sync-interval-min", "often"}, "", `invalid sync-interval-min "often": accepted: a Go duration from 1s to 24h0m0s`},
		{[]string{"--sync-interval-min", "300s"}, "", `invalid sync-interval-min "300s": accepted: at most sync-interval (4m0s)`},
		{[]string{"--sync-interval-min", "20s", "--sync-interval", "10s"}, "", `invalid sync-interval-min "20s": accepted: at most sync-interval (10s)`},
		{[]string{"--sync-target", "0"}, "", `invalid sync-target "0": accepted: a Go duration from 1µs to 1s`},
		{nil, "sync-target: 2s\n", `invalid sync-target "2s": accepted: a Go duration from 1µs to 1s`},
	}
	for _, c := range cases {
		_, _, err := load(t, c.file, c.args...)
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %q: err = %v, want a *config.Error containing %q", c.args, c.file, err, c.want)
		}
	}
}

// TestAuthWindow: the window in force is what Effective shows, with its
// source: the hour by default; 0, which once printed as the default and
// turned the check off when copied into the file, is refused with the
// key and the range, from the file as from a flag.
func TestAuthWindow(t *testing.T) {
	for _, c := range []struct {
		file   string
		args   []string
		want   time.Duration
		source string
	}{
		{"", nil, time.Hour, "default"},
		{"auth-window: 2h\n", nil, 2 * time.Hour, "file"},
		{"", []string{"--auth-window", "30s"}, 30 * time.Second, "flag"},
	} {
		cfg, fs, err := load(t, c.file, c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Auth.Window != c.want {
			t.Errorf("%v %q: window %v, want %v", c.args, c.file, cfg.Auth.Window, c.want)
		}
		for _, s := range Effective(fs, cfg) {
			if s.Key == "auth-window" && (s.Value != c.want.String() || s.Source != c.source) {
				t.Errorf("%v %q: timed config shows %s # %s, want %v # %s", c.args, c.file, s.Value, s.Source, c.want, c.source)
			}
		}
	}
	const accepted = `accepted: a Go duration from 1s to 8760h0m0s`
	for _, c := range []struct {
		file string
		args []string
		want string
	}{
		{"auth-window: 0\n", nil, `invalid auth-window "0": ` + accepted},
		{"", []string{"--auth-window", "0s"}, `invalid auth-window "0s": ` + accepted},
		{"", []string{"--auth-window", "-1h"}, `invalid auth-window "-1h": ` + accepted},
		{"", []string{"--auth-window", "9000h"}, `invalid auth-window "9000h": ` + accepted},
	} {
		_, _, err := load(t, c.file, c.args...)
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %q: err = %v, want a *config.Error containing %q", c.args, c.file, err, c.want)
		}
	}
}

// TestMaxSourceInfluence: 50 ms unless set; 0 is a value (no bound), not
// "unset".
func TestMaxSourceInfluence(t *testing.T) {
	for _, c := range []struct {
		args []string
		want time.Duration
	}{
		{nil, 50 * time.Millisecond},
		{[]string{"--max-source-influence", "0"}, 0},
		{[]string{"--max-source-influence", "10ms"}, 10 * time.Millisecond},
	} {
		cfg, _, err := load(t, "", c.args...)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Sync.MaxSourceInfluence != c.want {
			t.Errorf("%v: max-source-influence %v, want %v", c.args, cfg.Sync.MaxSourceInfluence, c.want)
		}
	}
}

// TestReference: off unless set; kernel makes the host master-capable
// and keeps the health bounds' defaults unless they are set.
func TestReference(t *testing.T) {
	cfg, _, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sync.Reference || cfg.MayBeMaster {
		t.Errorf("default: reference %v, master %v; want both off", cfg.Sync.Reference, cfg.MayBeMaster)
	}
	cfg, _, err = load(t, "reference: kernel\nreference-max-error: 20ms\n")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Sync.Reference || !cfg.MayBeMaster || !cfg.Election.MayBeMaster {
		t.Errorf("reference kernel: reference %v, master %v/%v; want all on", cfg.Sync.Reference, cfg.MayBeMaster, cfg.Election.MayBeMaster)
	}
	if cfg.Sync.ReferenceMaxError != 20*time.Millisecond || cfg.Sync.ReferenceHold != DefaultReferenceHold {
		t.Errorf("reference bounds %v, hold %v; want 20ms and %v", cfg.Sync.ReferenceMaxError, cfg.Sync.ReferenceHold, DefaultReferenceHold)
	}
}

func TestExplicitMissingFileIsAnError(t *testing.T) {
	fs := pflag.NewFlagSet("timed", pflag.ContinueOnError)
	AddFlags(fs)
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	if err := fs.Parse([]string{"--config", missing}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(fs); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("err = %v, want one naming %s", err, missing)
	}
}

func TestEnvListsAndBools(t *testing.T) {
	t.Setenv("TIMED_TRUSTED", "a b,c")
	t.Setenv("TIMED_FREQUENCY_DISCIPLINE", "false")
	c, _, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c.Trusted, "|") != "a|b|c" || c.Sync.FrequencyDiscipline || !c.MayBeMaster {
		t.Fatalf("trusted %v discipline %v master %v", c.Trusted, c.Sync.FrequencyDiscipline, c.MayBeMaster)
	}
}

func TestShippedExampleLoads(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "systemd", "timed.yaml.example"))
	if err != nil {
		t.Fatal(err)
	}
	c, _, err := load(t, string(example))
	if err != nil {
		t.Fatalf("systemd/timed.yaml.example: %v", err)
	}
	if !c.MayBeMaster || c.Port != 525 || c.Clock != "system" {
		t.Fatalf("example loaded as %+v", c)
	}
}

func TestEveryTimerHasAFlag(t *testing.T) {
	fs := pflag.NewFlagSet("timed", pflag.ContinueOnError)
	AddFlags(fs)
	for _, k := range durationKeys {
		if fs.Lookup(k.key) == nil {
			t.Errorf("no flag --%s", k.key)
		}
	}
	// Each flag lands in its own field: set them all to distinct values.
	c := &Config{}
	for i, k := range durationKeys {
		*k.field(c) = time.Duration(i+1) * time.Second
	}
	seen := map[time.Duration]string{}
	for _, k := range durationKeys {
		d := *k.field(c)
		if other, dup := seen[d]; dup {
			t.Errorf("--%s and --%s write the same field", k.key, other)
		}
		seen[d] = k.key
	}
}

// makestep: chrony's makestep, on by default (1 ms, 3 corrections); a bad
// value names its key and range.
func TestMakeStep(t *testing.T) {
	c, _, err := load(t, "")
	if err != nil || c.Sync.MakeStepThreshold != time.Millisecond || c.Sync.MakeStepCount != 3 {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, _, err = load(t, "makestep-threshold: 50ms\nmakestep-count: 0\n")
	if err != nil || c.Sync.MakeStepThreshold != 50*time.Millisecond || c.Sync.MakeStepCount != 0 {
		t.Fatalf("from the file: %+v %v", c, err)
	}
	for _, bad := range []struct{ args []string }{
		{[]string{"--makestep-count", "101"}}, {[]string{"--makestep-count", "-1"}},
		{[]string{"--makestep-threshold", "-1ms"}}, {[]string{"--makestep-threshold", "25h"}},
	} {
		_, _, err := load(t, "", bad.args...)
		key := strings.TrimPrefix(bad.args[0], "--")
		want := fmt.Sprintf("invalid %s %q: accepted: ", key, bad.args[1])
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q…", bad.args, err, want)
		}
	}
	// A flag that is no integer is pflag's to refuse; in the file, ours.
	if _, _, err := load(t, "makestep-count: often\n"); err == nil || !strings.Contains(err.Error(), `invalid makestep-count "often": accepted: an integer from 0 to 100`) {
		t.Errorf("makestep-count: often: %v", err)
	}
}
