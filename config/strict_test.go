package config

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// errorsOf splits a Load error into its lines (errors.Join's form).
func errorsOf(err error) []string {
	if err == nil {
		return nil
	}
	return strings.Split(err.Error(), "\n")
}

func TestUnknownKeysAreErrors(t *testing.T) {
	for _, c := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"typo in the file", "master: true\nsync-intervall: 10s\n", nil,
			[]string{`unknown key "sync-intervall" in `, `timed.yaml:2 (did you mean "sync-interval"?)`}},
		{"no near key", "foo: bar\n", nil, []string{`unknown key "foo" in `, "timed.yaml:1"}},
		{"underscores", "sync_interval: 10s\n", nil, []string{`unknown key "sync_interval"`, `did you mean "sync-interval"?`}},
		{"nested map", "sync:\n  interval: 10s\n", nil,
			[]string{`unknown key "sync" in `, `keys are flat, without nested maps; did you mean "sync-interval"?`}},
		{"nested under an unknown name", "timers:\n  x: 1\n", nil, []string{`unknown key "timers"`, "keys are flat"}},
		{"config in the file", "config: /etc/other.yaml\n", nil, []string{`unknown key "config"`, "use --config or TIMED_CONFIG"}},
		{"typo in the environment", "", map[string]string{"TIMED_SYNC_INTERVALL": "10s"},
			[]string{"unknown environment variable TIMED_SYNC_INTERVALL (did you mean TIMED_SYNC_INTERVAL?)"}},
		{"unknown variable", "", map[string]string{"TIMED_FOO": "bar"}, []string{"unknown environment variable TIMED_FOO"}},
		{"lower-case variable", "", map[string]string{"TIMED_port": "1525"}, []string{"unknown environment variable TIMED_port (did you mean TIMED_PORT?)"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			_, _, err := load(t, c.file)
			var uk *UnknownKeyError
			if !errors.As(err, &uk) {
				t.Fatalf("err = %v, want an UnknownKeyError", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestToolingEnvIsNotConfiguration: the variables the project's tooling
// sets (ToolingEnv) and TIMED_AUTH_KEYS, a real key, do not stop the
// daemon.
func TestToolingEnvIsNotConfiguration(t *testing.T) {
	for _, name := range []string{"TIMED_VECTORS", "TIMED_SEED", "TIMED_IMAGE", "TIMED_E2E_RUN", "TIMED_E2E_FIGURES", "TIMED_E2E_ATTACKER", "TIMED_AUTH_KEYS"} {
		t.Setenv(name, "x")
	}
	c, _, err := load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.Auth.KeyFile != "x" {
		t.Errorf("TIMED_AUTH_KEYS not read: %q", c.Auth.KeyFile)
	}
}

func TestKeysAreCaseInsensitiveInTheFile(t *testing.T) {
	c, _, err := load(t, "Sync-Interval: 60s\nPORT: 1525\n")
	if err != nil {
		t.Fatal(err)
	}
	if c.Election.SyncInterval != time.Minute || c.Port != 1525 {
		t.Fatalf("sync-interval %v port %d", c.Election.SyncInterval, c.Port)
	}
}

// TestEveryProblemInOneRun: each bad value, unknown key and bad type is
// reported, in one error, whatever else is wrong.
func TestEveryProblemInOneRun(t *testing.T) {
	for _, c := range []struct {
		name, file string
		args       []string
		want       []string
	}{
		{"values, keys and flags", "port: many\nlog-format: xml\nsync-intervall: 1s\nhostname: [a, b]\nfrequency-discipline: maybe\n",
			[]string{"--clock", "atomic", "--candidate-wait", "2h"}, []string{
				`invalid port "many"`, `invalid log-format "xml"`, `unknown key "sync-intervall"`,
				`invalid hostname "[\"a\",\"b\"]": accepted: a host name`, `invalid frequency-discipline "maybe"`,
				`invalid clock "atomic"`, `invalid candidate-wait "2h"`}},
		// A file that does not parse must not hide the flags' problems.
		{"unparsable file", "port: [1525\nlog-format: json\n", []string{"--log-level", "loud", "--port", "0"},
			[]string{"timed.yaml: yaml: line", `invalid log-level "loud"`, `invalid port "0"`}},
		{"key given twice", "port: 1525\nport: 1526\n", []string{"--log-format", "xml"},
			[]string{`timed.yaml:2: key "port" given twice (first at line 1)`, `invalid log-format "xml"`}},
		{"not a map", "- port\n- 1525\n", []string{"--log-format", "xml"},
			[]string{"the file must be a map of key: value lines, not a list", `invalid log-format "xml"`}},
		{"list where a duration belongs", "sync-interval: [1s]\nmax-step: {a: 1}\n", nil,
			[]string{`invalid sync-interval "[\"1s\"]": accepted: a Go duration`, `invalid max-step "{\"a\":1}"`}},
		{"map where a list belongs", "trusted: {a: b}\n", nil, []string{`invalid trusted "{\"a\":\"b\"}": accepted: a list`}},
		{"two bad orders", "", []string{"--accept-window", "59m", "--answer-delay", "50s"},
			[]string{`invalid accept-window "59m"`, `invalid answer-delay "50s"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := load(t, c.file, c.args...)
			if err == nil {
				t.Fatal("loaded")
			}
			if n := len(errorsOf(err)); n < len(c.want) {
				t.Errorf("%d problems reported, want %d: %v", n, len(c.want), err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestDependentDefaults: a timer the user did not set follows the ones
// set (derive.go); only a value the user gave is refused.
func TestDependentDefaults(t *testing.T) {
	type want map[string]time.Duration
	for _, c := range []struct {
		args    []string
		want    want
		derived map[string]string // key → what Effective says it follows
	}{
		{[]string{"--election-timeout-min", "4s", "--election-timeout-max", "8s"},
			want{"sync-interval": 2667 * time.Millisecond, "first-sync": 33338 * time.Microsecond, "accept-window": 333333 * time.Microsecond,
				"fast-election": 3 * time.Second, "election-timeout-min": 4 * time.Second, "election-timeout-max": 8 * time.Second},
			map[string]string{"sync-interval": "election-timeout-min", "accept-window": "election-timeout-min", "first-sync": "sync-interval"}},
		{[]string{"--sync-interval", "500s"},
			want{"election-timeout-min": 750 * time.Second, "election-timeout-max": 900 * time.Second, "first-sync": 3 * time.Second, "accept-window": 30 * time.Second},
			map[string]string{"election-timeout-min": "sync-interval"}},
		{[]string{"--sync-interval", "1h"},
			want{"election-timeout-min": 90 * time.Minute, "election-timeout-max": 225 * time.Minute}, nil},
		{[]string{"--election-timeout-max", "200s"},
			want{"election-timeout-min": 80 * time.Second, "sync-interval": 53333 * time.Millisecond}, nil},
		{[]string{"--election-timeout-min", "20m"}, want{"election-timeout-max": 50 * time.Minute}, nil},
		// Squeezed between two values set: the profile's place between them.
		{[]string{"--sync-interval", "500s", "--election-timeout-max", "600s"},
			want{"election-timeout-min": 518182 * time.Millisecond}, map[string]string{"election-timeout-min": "sync-interval and election-timeout-max"}},
		{[]string{"--candidate-wait", "50ms"}, want{"answer-delay": 1667 * time.Microsecond}, map[string]string{"answer-delay": "candidate-wait"}},
		{[]string{"--max-step", "10s"}, want{"step-threshold": 200 * time.Millisecond}, nil},
		{[]string{"--profile", "fast", "--election-timeout-min", "2s"},
			want{"sync-interval": 1333 * time.Millisecond, "election-timeout-max": 15 * time.Second, "accept-window": 500 * time.Millisecond}, nil},
		// The profile's value kept where it already keeps the order.
		{[]string{"--sync-interval", "60s", "--candidate-wait", "1s", "--max-step", "30s"},
			want{"election-timeout-min": 360 * time.Second, "answer-delay": 100 * time.Millisecond, "step-threshold": 20 * time.Second}, map[string]string{}},
	} {
		cfg, fs, err := load(t, "", c.args...)
		if err != nil {
			t.Errorf("%v: %v", c.args, err)
			continue
		}
		for key, d := range c.want {
			if got := *keyField(t, key)(cfg); got != d {
				t.Errorf("%v: %s = %v, want %v", c.args, key, got, d)
			}
		}
		settings := map[string]Setting{}
		for _, s := range Effective(fs, cfg) {
			settings[s.Key] = s
		}
		for key, from := range c.derived {
			if s := settings[key]; s.Source != "derived" || s.DerivedFrom != from {
				t.Errorf("%v: %s: source %q from %q, want derived from %q", c.args, key, s.Source, s.DerivedFrom, from)
			}
		}
		if c.derived != nil && len(c.derived) == 0 {
			for _, s := range settings {
				if s.Source == "derived" {
					t.Errorf("%v: %s derived from %s; the profile's value fitted", c.args, s.Key, s.DerivedFrom)
				}
			}
		}
	}
}

// TestUserValuesOutOfOrderAreRefused: a value the user gave that breaks an
// order is refused, naming it, and never moves a timer it depends on.
func TestUserValuesOutOfOrderAreRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--accept-window", "400s"}, `invalid accept-window "400s": accepted: less than election-timeout-min (6m0s)`},
		{[]string{"--election-timeout-min", "4s", "--election-timeout-max", "8s", "--accept-window", "4s"},
			`invalid accept-window "4s": accepted: less than election-timeout-min (4s)`},
		{[]string{"--sync-interval", "4s", "--accept-window", "5s", "--election-timeout-min", "5s"},
			`invalid accept-window "5s": accepted: less than election-timeout-min (5s)`},
		{[]string{"--answer-delay", "5s"}, `invalid answer-delay "5s": accepted: less than candidate-wait (3s)`},
		{[]string{"--step-threshold", "2000s"}, `invalid step-threshold "2000s": accepted: at most max-step (16m40s)`},
		{[]string{"--first-sync", "10m"}, `invalid first-sync "10m": accepted: at most sync-interval (4m0s)`},
		{[]string{"--fast-election", "10m"}, `invalid fast-election "10m": accepted: at most election-timeout-min (6m0s)`},
		{[]string{"--cold-start-delay", "7m"}, `invalid cold-start-delay "7m": accepted: at most election-timeout-min (6m0s)`},
		{[]string{"--cold-start-delay", "-1s"}, `invalid cold-start-delay "-1s": accepted: a Go duration from 0s to 1h0m0s`},
		{[]string{"--election-timeout-min", "4s", "--fast-election", "5s"},
			`invalid fast-election "5s": accepted: at most election-timeout-min (4s)`},
		{[]string{"--sync-interval", "500s", "--election-timeout-max", "400s"},
			`invalid election-timeout-max "400s": accepted: more than election-timeout-min`},
		// sync-interval cannot follow below its least value, 100ms.
		{[]string{"--election-timeout-min", "100ms"}, `invalid election-timeout-min "100ms": accepted: more than sync-interval (100ms, derived from election-timeout-min)`},
		{[]string{"--first-sync", "0s"}, `invalid first-sync "0s": accepted: a Go duration from 1ms to 1h0m0s`},
		{[]string{"--no-master-wait", "0s"}, `invalid no-master-wait "0s": accepted: a Go duration from 1ms to 1h0m0s`},
	} {
		_, _, err := load(t, "", c.args...)
		var ce *Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: err = %v, want one containing %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "invalid timers") {
			t.Errorf("%v: the election's own check caught what config should have named: %v", c.args, err)
		}
	}
}

// TestOnlyUserValuesAreRefused: whatever timers a user sets, in range,
// the configuration loads or its errors name only keys the user set, and
// never fall through to the election's own check.
func TestOnlyUserValuesAreRefused(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 14))
	keys := []string{"sync-interval", "first-sync", "election-timeout-min", "election-timeout-max", "fast-election",
		"accept-window", "candidate-wait", "answer-delay", "step-threshold", "max-step", "cold-start-delay"}
	steps := []time.Duration{time.Millisecond, 50 * time.Millisecond, 200 * time.Millisecond, time.Second, 3 * time.Second,
		10 * time.Second, time.Minute, 5 * time.Minute, 20 * time.Minute, time.Hour}
	loaded := 0
	for i := 0; i < 300; i++ {
		args := []string{"--profile", []string{"bsd", "fast"}[rng.IntN(2)]}
		set := map[string]bool{}
		for _, k := range keys {
			if rng.IntN(4) == 0 {
				args = append(args, "--"+k, steps[rng.IntN(len(steps))].String())
				set[k] = true
			}
		}
		_, _, err := load(t, "", args...)
		if err == nil {
			loaded++
			continue
		}
		for _, line := range errorsOf(err) {
			key := strings.Fields(strings.TrimPrefix(line, "invalid "))[0]
			if !set[key] {
				t.Errorf("%v: %s: names a key not set", args, line)
			}
		}
	}
	if loaded < 50 {
		t.Errorf("only %d of 300 loaded", loaded)
	}
}

func TestSuggestions(t *testing.T) {
	known := Keys()
	for key, want := range map[string]string{
		"sync-intervall": "sync-interval", "maxstep": "max-step", "SYNC_INTERVAL": "sync-interval",
		"election-timeout-mn": "election-timeout-min", "foo": "", "x": "", "masterr": "master", "peer": "peers",
	} {
		if got := nearest(key, known); got != want {
			t.Errorf("nearest(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestFileNamed(t *testing.T) {
	c, _, err := load(t, "port: 1525\n")
	if err != nil {
		t.Fatal(err)
	}
	if !c.FileFound || !strings.HasSuffix(c.File, "timed.yaml") {
		t.Errorf("file %q found %v", c.File, c.FileFound)
	}
	c, _, err = load(t, "")
	if err != nil {
		t.Fatal(err)
	}
	if c.FileFound || c.File == "" {
		t.Errorf("no file: file %q found %v", c.File, c.FileFound)
	}
}

func keyField(t *testing.T, key string) func(*Config) *time.Duration {
	t.Helper()
	for _, k := range durationKeys {
		if k.key == key {
			return k.field
		}
	}
	t.Fatalf("no timer %s", key)
	return nil
}
