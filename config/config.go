// Package config is timed's configuration: BSD's options with their old
// meanings, long options for everything else, and one precedence order for
// all of them: flags > environment (TIMED_*) > file > defaults.
//
// It only reads and validates. A bad value is an error that names the key,
// the value and what is accepted, so the daemon stops at start-up with a
// message a sysadmin can act on; nothing here opens sockets or touches
// clocks.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cast"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp/auth"
	"github.com/timed-project/timed/tsp/udp"
)

// DefaultPath is where the daemon looks for its file when --config is not
// given; a missing file there is not an error.
const DefaultPath = "/etc/timed/timed.yaml"

// DefaultControlSocket is shared by timed and timedc.
const DefaultControlSocket = "/run/timed/timed.sock"

// EnvPrefix is the prefix of environment variables: --sync-interval is
// TIMED_SYNC_INTERVAL.
const EnvPrefix = "TIMED"

// Config is the daemon's effective configuration.
type Config struct {
	// BSD options.
	MayBeMaster    bool           // -M: may become master
	Trusted        []string       // -F: trusted hosts, [host|addr][:port], resolved to addresses by the daemon (implies -M); empty trusts everyone
	Networks       []netip.Prefix // -n: use only these networks
	IgnoreNetworks []netip.Prefix // -i: ignore these networks
	Trace          bool           // -t: trace packets
	Debug          bool           // -d: foreground, debug logging

	Port          int        // UDP port of TSP (BSD: 525)
	Hostname      string     // name written in packets; empty = the system's
	Interfaces    string     // go-sockaddr template selecting interfaces; empty = BSD's choice
	Family        udp.Family // which family serves a link that has both: auto, ipv4, ipv6, both
	IPv6Group     netip.Addr // the IPv6 link-local group that stands for broadcast
	Peers         []string   // host:port, [IPv6]:port, [fe80::1%eth0]:port; when set, broadcast becomes unicast fan-out
	Clock         string     // system | dry-run | sim:offset=…,drift=…
	ControlSocket string
	LogLevel      logrus.Level
	LogFormat     string // text | json
	MetricsListen string // host:port; empty = no metrics endpoint
	Profile       string // bsd | fast: the defaults the timers start from

	// Election holds every protocol timer (and, once loaded, the name,
	// master eligibility and trusted list) for the election machine.
	Election election.Config
	Sync     Sync
	Auth     Auth

	// File is the configuration file looked for (--config, TIMED_CONFIG,
	// or DefaultPath; "" with --config ""), FileFound whether it was there
	// and read. A file missing at the default path is not an error.
	File      string
	FileFound bool

	inFile  map[string]bool   // the keys the file set
	derived map[string]string // dependent defaults: key → the key it follows
}

// Auth are the keyed-authentication settings (tsp/auth). Off by default,
// so that BSD daemons, which cannot sign, keep working.
type Auth struct {
	Mode          auth.Mode      // off | optional | required
	KeyFile       string         // chrony-format key file; needed unless Mode is off
	SignKey       uint32         // key ID to sign with; 0: the lowest in the file
	UnsignedPeers []netip.Prefix // optional: the BSD hosts whose unsigned packets are accepted
	// Window is the first-contact timestamp window, as in force:
	// auth.DefaultWindow unless set (minAuthWindow to maxAuthWindow).
	Window   time.Duration
	StateDir string // where replay state survives restarts; empty: nothing kept
}

// Sync are the clock-synchronisation settings.
type Sync struct {
	StepThreshold       time.Duration // corrections at or above are sent as SETTIME (BSD 20 s)
	MaxStep             time.Duration // corrections above are refused, never applied
	FrequencyDiscipline bool          // slaves correct their frequency, not only their offset
	// MaxSourceInfluence bounds how far one disagreeing host can move the
	// master's network time in a round; 0: no bound (BSD).
	MaxSourceInfluence time.Duration
	// DriftFile keeps the frequency estimate across restarts (chrony's
	// driftfile): read at start, written every hour and at stop; empty:
	// nothing kept.
	DriftFile string
	// MakeStepThreshold and MakeStepCount are chrony's makestep: the
	// first MakeStepCount corrections after start or an alarm, at or
	// above MakeStepThreshold, are stepped even below step-threshold
	// (never beyond max-step). Count 0: off, BSD's slewing.
	MakeStepThreshold time.Duration
	MakeStepCount     int
	// IntervalFloor and IntervalTarget make a master's rounds adaptive
	// (clocksync.IntervalController): from IntervalFloor up to the
	// sync-interval, aiming to keep each clock within IntervalTarget
	// between rounds. A floor equal to the sync-interval is BSD's fixed
	// rounds (the fast profile's default).
	IntervalFloor  time.Duration
	IntervalTarget time.Duration
	// KernelSyncStatus: with the system clock, the kernel is told whether
	// the clock is synchronised (STA_UNSYNC, maxerror, esterror), as
	// ntpd, systemd-timesyncd and chrony with rtcsync tell it.
	KernelSyncStatus bool
	// Reference (--reference kernel): this host's clock is kept by
	// another program (chrony, ntpd, a PTP or GPS stack). timed never
	// changes it, may be master, and as master serves its own clock as
	// the network time while the kernel says it is synchronised
	// (STA_UNSYNC clear, maxerror at most ReferenceMaxError); it stops
	// claiming (and claims again) only once that has held for
	// ReferenceHold (timed/reference.go).
	Reference         bool
	ReferenceMaxError time.Duration
	ReferenceHold     time.Duration
}

// Reference defaults: a maxerror bound a chrony or ntpd following a
// LAN or Internet server keeps well within, and a hold of a few checks.
const (
	DefaultReferenceMaxError = 100 * time.Millisecond
	DefaultReferenceHold     = time.Minute
)

// MaxMakeStepCount bounds makestep-count: past a few rounds the clock is
// synchronised, and steps would only hide a fault.
const MaxMakeStepCount = 100

// profiles are the timer defaults a run starts from: BSD's values, or the
// same protocol scaled down so an election takes a second or so (tests,
// the demo, the docker-compose network). The election package owns both.
var profiles = map[string]func(name string) election.Config{
	"bsd":  election.DefaultConfig,
	"fast": election.FastConfig,
}

// Error is a bad configuration value.
type Error struct {
	Key      string // the long option / file key / TIMED_ variable stem
	Value    string
	Accepted string
	Err      error // the underlying cause, if any
}

func (e *Error) Error() string {
	msg := fmt.Sprintf("invalid %s %q: accepted: %s", e.Key, e.Value, e.Accepted)
	if e.Err != nil {
		msg += " (" + e.Err.Error() + ")"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// durationKeys maps each timer key to its field and accepted range.
type durationKey struct {
	key      string
	usage    string
	min, max time.Duration
	field    func(*Config) *time.Duration
}

var durationKeys = []durationKey{
	{"sync-interval", "master's sync round, the longest with adaptive rounds (BSD 240s)", 100 * time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Election.SyncInterval }},
	{"first-sync", "delay from becoming master to the first round (BSD 3s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.FirstSync }},
	{"election-timeout-min", "lower end of the slave's election timer (BSD 360s)", 100 * time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Election.ElectionMin }},
	{"election-timeout-max", "upper end of the slave's election timer (BSD 900s)", 100 * time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Election.ElectionMax }},
	{"fast-election", "own election after an untrusted master was suppressed (BSD 3s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.FastElection }},
	{"candidate-wait", "candidate's wait after the last ACCEPT before it is master (BSD 3s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.CandidateWait }},
	{"accept-window", "time a slave refuses other candidates after an ACCEPT (BSD 30s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.AcceptWindow }},
	{"conflict-window", "wait for a second MASTERACK at start-up (BSD 300ms)", time.Millisecond, time.Minute, func(c *Config) *time.Duration { return &c.Election.ConflictWindow }},
	{"no-master-wait", "wait in No Master before becoming master (3s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.NoMasterWait }},
	{"cold-start-delay", "cold start: a daemon that sees others start and no master becomes master after a random wait, up to this per daemon seen; 0: off, as BSD (100ms)", 0, time.Hour, func(c *Config) *time.Duration { return &c.Election.ColdStartDelay }},
	{"settime-guard", "a SLAVEUP this long after MASTERUP is answered with SETTIME at once, unless from a slave that accepted the election and is not set yet: a round brought forward measures it (BSD 3s)", 0, time.Hour, func(c *Config) *time.Duration { return &c.Election.SetTimeGuard }},
	{"answer-delay", "upper bound of the random delay before answering a broadcast (BSD 100ms); widened per network to 50µs per host it may hold, at most half candidate-wait", 0, time.Minute, func(c *Config) *time.Duration { return &c.Election.AnswerDelay }},
	{"ack-timeout", "first retransmission delay of a reliable send; doubles for 5 copies (BSD 200ms)", time.Millisecond, time.Minute, func(c *Config) *time.Duration { return ackTimeout(c) }},
	{"step-threshold", "corrections at or above are steps, SETTIME (BSD 20s)", time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.StepThreshold }},
	{"max-step", "corrections above are refused (1000s)", time.Millisecond, 100 * 365 * 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.MaxStep }},
	{"makestep-threshold", "while not yet synchronised (the first makestep-count corrections after start or an alarm), corrections at or above are stepped, not slewed (1ms)", 0, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.MakeStepThreshold }},
	{"reference-max-error", "with --reference kernel: the kernel's maxerror at or below which this host claims to be a reference (100ms)", time.Millisecond, clocksync.MaxKernelError, func(c *Config) *time.Duration { return &c.Sync.ReferenceMaxError }},
	{"reference-hold", "with --reference kernel: how long the kernel's state must stay bad before the host stops claiming reference, and good before it claims again (1m)", 0, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.ReferenceHold }},
	{"sync-interval-min", "shortest sync round: rounds adapt from it up to sync-interval, short while the slaves' frequencies are learnt or the corrections grow; equal to sync-interval: fixed rounds, as BSD (8s; fast profile: sync-interval)", time.Second, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.IntervalFloor }},
	{"sync-target", "error adaptive rounds aim to keep each clock within between rounds (20µs)", clocksync.MinIntervalTarget, clocksync.MaxIntervalTarget, func(c *Config) *time.Duration { return &c.Sync.IntervalTarget }},
	{"max-source-influence", "most one host can move the master's network time in a round; 0: no bound, as BSD (50ms)", 0, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.MaxSourceInfluence }},
}

// ackTimeout is the first element of the retransmission schedule, the one
// knob a sysadmin turns: the copies that follow double it, as acksend does.
func ackTimeout(c *Config) *time.Duration {
	if len(c.Election.Retransmit) == 0 {
		c.Election.Retransmit = make([]time.Duration, 5)
	}
	return &c.Election.Retransmit[0]
}

// AddFlags registers every option on fs, BSD's short letters included.
func AddFlags(fs *pflag.FlagSet) {
	fs.String("config", DefaultPath, "configuration file (YAML)")
	fs.BoolP("master", "M", false, "may become master (BSD -M)")
	fs.StringSliceP("trusted", "F", nil, "trusted hosts; implies -M (BSD -F)")
	fs.StringSliceP("networks", "n", nil, "use only these networks, IPv4 or IPv6 CIDR (BSD -n)")
	fs.StringSliceP("ignore-networks", "i", nil, "ignore these networks, IPv4 or IPv6 CIDR (BSD -i)")
	fs.BoolP("trace", "t", false, "trace packets (BSD -t)")
	fs.BoolP("debug", "d", false, "stay in the foreground and log at debug level (BSD -d)")
	fs.Int("port", 525, "UDP port of TSP")
	fs.String("hostname", "", "name sent in packets (default: the system host name)")
	fs.String("interfaces", "", "go-sockaddr template selecting the interfaces (default: up, non-loopback; IPv4 broadcast-capable, IPv6 multicast-capable with a global or unique-local address)")
	fs.String("family", "auto", "address family on a link that has both: auto (IPv4 where the interface has IPv4, where BSD daemons may be; elsewhere IPv6, where it has a global or unique-local address) | ipv4 | ipv6 | both (both families of the link, one election across them: IPv4-only, IPv6-only and dual-stack daemons get one master)")
	fs.String("ipv6-group", udp.DefaultGroup.String(), "IPv6 link-local multicast group that stands for broadcast on IPv6 links (ff02::/16)")
	fs.StringSlice("peers", nil, "host:port, [IPv6]:port or [fe80::1%eth0]:port list; broadcast becomes unicast to these peers")
	fs.String("clock", "system", "clock to discipline: system | dry-run | sim:offset=±D,drift=±Nppm[,wander=Nppm,temp=Nppm,period=D,seed=N] (a simulated clock; wander, temp: a crystal's frequency noise)")
	fs.String("control-socket", DefaultControlSocket, "unix socket for timedc status")
	fs.String("log-level", "info", "panic | fatal | error | warn | info | debug | trace")
	fs.String("log-format", "text", "text | json")
	fs.String("metrics-listen", "", "host:port for Prometheus metrics (default: off)")
	fs.String("profile", "bsd", "timer defaults: bsd | fast")
	for _, k := range durationKeys {
		fs.String(k.key, "", k.usage+" (Go duration; default from --profile, or derived from the timers it must stay in order with)")
	}
	fs.Int("makestep-count", clocksync.DefaultMakeStep.Count, fmt.Sprintf("how many corrections after start or an alarm may be stepped (makestep-threshold); 0: none, slew as BSD (at most %d)", MaxMakeStepCount))
	fs.Bool("frequency-discipline", true, "slaves correct their frequency too (false: BSD behaviour)")
	fs.Bool("kernel-sync-status", true, "with --clock system, tell the kernel whether the clock is synchronised (STA_UNSYNC, maxerror, esterror): what timedatectl and time-sync.target read, and what turns on the kernel's 11-minute RTC updates; false leaves the kernel's state alone")
	fs.String("reference", "off", "kernel: another program (chrony, ntpd) keeps this host's clock; timed never changes it, may be master, and serves it as the network time while the kernel says it is synchronised | off")
	fs.String("drift-file", "", "file keeping the frequency estimate (ppm) across restarts: read at start, written hourly and at stop (default: none; the unit sets /var/lib/timed/drift)")
	fs.String("auth", "off", "packet authentication: off | optional (sign; accept unsigned only from --unsigned-peers) | required")
	fs.String("auth-keys", "", "key file, chrony's format (ID TYPE KEY), readable by its owner only")
	fs.Uint32("auth-sign-key", 0, "ID of the key to sign with (default: the lowest in the file)")
	fs.StringSlice("unsigned-peers", nil, "with --auth optional: addresses or CIDRs (BSD hosts) whose unsigned packets are accepted")
	fs.String("auth-window", auth.DefaultWindow.String(), fmt.Sprintf("first contact with a sender identity not yet known: its timestamp must be this close to our clock, either way (Go duration, %v to %v; cannot be turned off)", minAuthWindow, maxAuthWindow))
	fs.String("state-dir", "", "directory for state kept across restarts (replay protection); the unit sets /var/lib/timed")
}

// Load reads the configuration with flags > environment > file > defaults.
// fs must have been set up by AddFlags and parsed.
//
// Every problem is reported, not only the first: each bad value (naming
// key, value and what is accepted), each unknown key in the file or the
// environment (with the nearest known key), a file that cannot be read or
// parsed. The error is then an errors.Join of them all, and no Config.
func Load(fs *pflag.FlagSet) (*Config, error) {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(fs); err != nil {
		return nil, fmt.Errorf("bind flags: %w", err)
	}
	errs := envKeys(os.Environ())
	path := v.GetString("config")
	explicit := fs.Changed("config") || os.Getenv(EnvPrefix+"_CONFIG") != ""
	var found bool
	var inFile map[string]bool
	if path != "" {
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist) && !explicit:
			// None at the default path: defaults, environment and flags.
		case err != nil:
			errs = append(errs, fmt.Errorf("read config %s: %w", path, err))
		default:
			found = true
			var ferrs []error
			inFile, ferrs = readFile(v, path, b)
			errs = append(errs, ferrs...)
		}
	}
	c, verrs := fromViper(v)
	errs = append(errs, verrs...)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.File, c.FileFound, c.inFile = path, found, inFile
	return c, nil
}

// readFile checks the file's keys and gives its values to v. A file that
// does not parse is one error (YAML's first) and none of its values.
func readFile(v *viper.Viper, path string, b []byte) (map[string]bool, []error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, []error{fmt.Errorf("config %s: %w", path, err)}
	}
	keys, errs := fileKeys(path, &doc)
	if len(errs) > 0 && len(keys) == 0 && len(doc.Content) > 0 && doc.Content[0].Kind != yaml.MappingNode {
		return nil, errs // not a map: nothing for viper to read
	}
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(b)); err != nil && len(errs) == 0 {
		// fileKeys reports what YAML's decoder trips on (a key given
		// twice) with its line; anything else is said here.
		errs = append(errs, fmt.Errorf("config %s: %w", path, err))
	}
	return keys, errs
}

// reader reads v's values, collecting an error for each bad one.
type reader struct {
	v    *viper.Viper
	errs []error
}

func (r *reader) bad(key, value, accepted string, err error) {
	r.errs = append(r.errs, &Error{Key: key, Value: value, Accepted: accepted, Err: err})
}

// scalar is key's value as a string; a list or map (from the file) where
// one value belongs is an error, and "".
func (r *reader) scalar(key, accepted string) string {
	raw := r.v.Get(key)
	switch raw.(type) {
	case []any, map[string]any:
		r.bad(key, show(raw), accepted, nil)
		return ""
	}
	return cast.ToString(raw)
}

// list accepts a YAML list, a comma/space separated string (flags and
// environment variables), or nothing; a map is an error.
func (r *reader) list(key, accepted string) []string {
	raw := r.v.Get(key)
	if _, isMap := raw.(map[string]any); isMap {
		r.bad(key, show(raw), accepted, nil)
		return nil
	}
	return list(raw)
}

// integer is key's value as an integer from lo to hi; anything else is
// an error.
func (r *reader) integer(key string, lo, hi int) int {
	raw := r.v.Get(key)
	n, err := cast.ToIntE(raw)
	if err != nil || n < lo || n > hi {
		r.bad(key, show(raw), fmt.Sprintf("an integer from %d to %d", lo, hi), nil)
	}
	return n
}

func (r *reader) boolean(key string) bool {
	raw := r.v.Get(key)
	b, err := cast.ToBoolE(raw)
	if err != nil {
		r.bad(key, show(raw), "true or false", nil)
	}
	return b
}

// show writes a value as the user wrote it: strings as they are, lists
// and maps from the file in JSON's flow form.
func show(raw any) string {
	switch x := raw.(type) {
	case string:
		return x
	case []any, map[string]any:
		if b, err := json.Marshal(x); err == nil {
			return string(b)
		}
	}
	return fmt.Sprint(raw)
}

func fromViper(v *viper.Viper) (*Config, []error) {
	c := &Config{}
	r := &reader{v: v}
	bad := r.bad

	c.Profile = r.scalar("profile", "bsd or fast")
	defaults, ok := profiles[c.Profile]
	if !ok {
		bad("profile", c.Profile, "bsd or fast", nil)
		defaults = election.DefaultConfig
	}
	c.Election = defaults("")
	// MaxSourceInfluence: one host alone never makes the master step.
	c.Sync = Sync{StepThreshold: 20 * time.Second, MaxStep: 1000 * time.Second, MaxSourceInfluence: clocksync.DefaultMaxSourceInfluence,
		MakeStepThreshold: clocksync.DefaultMakeStep.Threshold,
		ReferenceMaxError: DefaultReferenceMaxError, ReferenceHold: DefaultReferenceHold,
		IntervalFloor: clocksync.DefaultIntervalFloor, IntervalTarget: clocksync.DefaultIntervalTarget}
	if c.Profile == "fast" {
		c.Sync.IntervalFloor = c.Election.SyncInterval // fixed 4 s rounds
	}

	c.MayBeMaster = r.boolean("master")
	c.Trusted = r.list("trusted", "a list of host names or addresses")
	if len(c.Trusted) > 0 {
		c.MayBeMaster = true // BSD: -F implies -M
	}
	switch ref := r.scalar("reference", "kernel or off"); ref {
	case "kernel":
		c.Sync.Reference = true
		c.MayBeMaster = true // a reference is master-capable
	case "off":
	default:
		bad("reference", ref, "kernel or off", nil)
	}
	c.Election.Reference = c.Sync.Reference
	c.Election.MayBeMaster = c.MayBeMaster // the daemon resolves Trusted to addresses
	c.Networks = prefixes(r, "networks")
	c.IgnoreNetworks = prefixes(r, "ignore-networks")
	if len(c.Networks) > 0 && len(c.IgnoreNetworks) > 0 {
		bad("networks", show(v.Get("networks")), "either networks (-n) or ignore-networks (-i), not both", nil)
	}
	c.Trace = r.boolean("trace")
	c.Debug = r.boolean("debug")

	c.Port = r.integer("port", 1, 65535)
	c.Hostname = r.scalar("hostname", "a host name of at most 255 bytes")
	if len(c.Hostname) > 255 {
		bad("hostname", c.Hostname, "at most 255 bytes", nil)
	}
	c.Interfaces = r.scalar("interfaces", "a go-sockaddr template")
	rawFamily := r.scalar("family", "auto, ipv4, ipv6 or both")
	var err error
	if c.Family, err = udp.ParseFamily(rawFamily); err != nil {
		bad("family", rawFamily, "auto, ipv4, ipv6 or both", nil)
	}
	rawGroup := r.scalar("ipv6-group", "an IPv6 link-local multicast address (ff02::/16)")
	if c.IPv6Group, err = netip.ParseAddr(rawGroup); err == nil {
		err = udp.CheckGroup(c.IPv6Group)
	}
	if err != nil {
		bad("ipv6-group", rawGroup, "an IPv6 link-local multicast address (ff02::/16), e.g. "+udp.DefaultGroup.String(), err)
	}
	c.Peers = r.list("peers", "a list of host:port")
	for _, p := range c.Peers {
		if _, _, err := udp.ParsePeer(p); err != nil {
			bad("peers", p, "host:port, [IPv6]:port or [fe80::1%zone]:port, with a port from 1 to 65535", err)
		}
	}
	const clocks = "system, dry-run or sim:offset=±D,drift=±Nppm"
	c.Clock = r.scalar("clock", clocks)
	if c.Clock != "system" && c.Clock != "dry-run" && !strings.HasPrefix(c.Clock, "sim:") && c.Clock != "sim" {
		bad("clock", c.Clock, clocks, nil)
	}
	if c.Sync.Reference && c.Clock != "system" {
		// Only the system clock has a kernel state to judge the claim by.
		bad("reference", "kernel", "off unless clock is system (a reference reads the kernel's sync state)", nil)
	}
	c.ControlSocket = r.scalar("control-socket", "a path")
	const levels = "panic, fatal, error, warn, info, debug or trace"
	rawLevel := r.scalar("log-level", levels)
	lvl, err := logrus.ParseLevel(rawLevel)
	if err != nil {
		bad("log-level", rawLevel, levels, nil)
	}
	c.LogLevel = lvl
	if c.Debug && c.LogLevel < logrus.DebugLevel {
		c.LogLevel = logrus.DebugLevel
	}
	c.LogFormat = r.scalar("log-format", "text or json")
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", c.LogFormat, "text or json", nil)
	}
	c.MetricsListen = r.scalar("metrics-listen", "host:port")
	if c.MetricsListen != "" {
		if err := checkHostPort(c.MetricsListen); err != nil {
			bad("metrics-listen", c.MetricsListen, "host:port (host may be empty)", err)
		}
	}
	c.Sync.MakeStepCount = r.integer("makestep-count", 0, MaxMakeStepCount)
	c.Sync.FrequencyDiscipline = r.boolean("frequency-discipline")
	c.Sync.DriftFile = r.scalar("drift-file", "a path")
	c.Sync.KernelSyncStatus = r.boolean("kernel-sync-status")
	c.Auth = authSettings(r)

	t := newTimers(c)
	for _, k := range durationKeys {
		accepted := fmt.Sprintf("a Go duration from %v to %v", k.min, k.max)
		raw := strings.TrimSpace(r.scalar(k.key, accepted))
		if raw == "" {
			continue // a default: the profile's, or derived (derive.go)
		}
		d, err := time.ParseDuration(raw)
		if err != nil || d < k.min || d > k.max {
			bad(k.key, raw, accepted, nil)
			continue
		}
		*k.field(c) = d
		t.set[k.key] = raw
	}
	r.errs = append(r.errs, t.derive()...)
	r.errs = append(r.errs, t.floor(c.Profile)...)
	if c.Sync.IntervalFloor < c.Election.SyncInterval {
		// Adaptive rounds: a slave that joins is measured within the
		// floor, not at the next round up to sync-interval away.
		c.Election.JoinSync = c.Sync.IntervalFloor
	}
	for i := 1; i < len(c.Election.Retransmit); i++ {
		c.Election.Retransmit[i] = 2 * c.Election.Retransmit[i-1]
	}
	c.derived = t.from
	if len(r.errs) == 0 {
		// The election package has the last word on its own invariants;
		// the name is the daemon's to fill in, so check with a stand-in.
		e := c.Election
		e.Name = "config-check"
		if err := e.Validate(); err != nil {
			bad("timers", "", "values the election accepts", err)
		}
	}
	if len(r.errs) > 0 {
		return nil, r.errs
	}
	return c, nil
}

// list accepts a YAML list, a comma/space separated string (flags and
// environment variables), or nothing.
func list(raw any) []string {
	var items []string
	for _, s := range cast.ToStringSlice(raw) {
		items = append(items, strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })...)
	}
	return items
}

func prefixes(r *reader, key string) []netip.Prefix {
	var out []netip.Prefix
	const accepted = "IPv4 or IPv6 networks in CIDR form, e.g. 192.0.2.0/24 or 2001:db8::/64"
	for _, s := range r.list(key, "a list of IPv4 or IPv6 networks in CIDR form") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			// BSD accepted a bare network number; take an address as its
			// /32 (IPv6: /128).
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || a.Zone() != "" {
				r.bad(key, s, accepted, err)
				continue
			}
			a = a.Unmap()
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() {
			r.bad(key, s, accepted+" (not IPv4-mapped)", nil)
			continue
		}
		out = append(out, p.Masked())
	}
	return out
}

// Setting is one effective value and where it came from, for `timed
// config`: Source is flag, env, file, default, or derived (a dependent
// default, derive.go), with DerivedFrom the key it follows.
type Setting struct {
	Key         string `json:"key"`
	Value       string `json:"value"`
	Source      string `json:"source"`
	DerivedFrom string `json:"derived_from,omitempty"`
}

// Effective lists every key with its effective value and source, sorted
// by key. fs is the flag set c was loaded from.
func Effective(fs *pflag.FlagSet, c *Config) []Setting {
	values := map[string]string{
		"master": strconv.FormatBool(c.MayBeMaster), "trusted": strings.Join(c.Trusted, ","),
		"networks": joinPrefixes(c.Networks), "ignore-networks": joinPrefixes(c.IgnoreNetworks),
		"trace": strconv.FormatBool(c.Trace), "debug": strconv.FormatBool(c.Debug),
		"port": strconv.Itoa(c.Port), "hostname": c.Hostname, "interfaces": c.Interfaces,
		"family": string(c.Family), "ipv6-group": c.IPv6Group.String(),
		"peers": strings.Join(c.Peers, ","), "clock": c.Clock, "control-socket": c.ControlSocket,
		"log-level": c.LogLevel.String(), "log-format": c.LogFormat, "metrics-listen": c.MetricsListen,
		"profile": c.Profile, "frequency-discipline": strconv.FormatBool(c.Sync.FrequencyDiscipline), "drift-file": c.Sync.DriftFile,
		"makestep-count": strconv.Itoa(c.Sync.MakeStepCount), "kernel-sync-status": strconv.FormatBool(c.Sync.KernelSyncStatus),
		"reference": referenceValue(c.Sync.Reference),
		"auth":      c.Auth.Mode.String(), "auth-keys": c.Auth.KeyFile, "auth-sign-key": strconv.FormatUint(uint64(c.Auth.SignKey), 10),
		"unsigned-peers": joinPrefixes(c.Auth.UnsignedPeers), "auth-window": c.Auth.Window.String(), "state-dir": c.Auth.StateDir,
	}
	for _, k := range durationKeys {
		values[k.key] = k.field(c).String()
	}
	var out []Setting
	for key, val := range values {
		s := Setting{Key: key, Value: val, Source: "default"}
		switch {
		case fs.Changed(key):
			s.Source = "flag"
		case os.Getenv(EnvName(key)) != "":
			s.Source = "env"
		case c.inFile[key]:
			s.Source = "file"
		case c.derived[key] != "":
			s.Source, s.DerivedFrom = "derived", c.derived[key]
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// The range of auth-window. 0 is refused rather than read as "off": it
// was printed as the default while the hour was in force, so that copying
// the printed value into the file turned the check off; and no first join
// needs "off" that a year's window does not give.
const (
	minAuthWindow = time.Second
	maxAuthWindow = 365 * 24 * time.Hour
)

// authSettings reads the auth keys; each bad value is reported with its
// key and what is accepted.
func authSettings(r *reader) Auth {
	var a Auth
	const modes = "off, optional or required"
	rawMode := r.scalar("auth", modes)
	mode, err := auth.ParseMode(rawMode)
	if err != nil {
		r.bad("auth", rawMode, modes, nil)
	}
	a.Mode = mode
	a.KeyFile = r.scalar("auth-keys", "a path")
	if a.Mode != auth.Off && a.KeyFile == "" {
		r.bad("auth-keys", "", "a key file when auth is "+a.Mode.String(), nil)
	}
	id, err := cast.ToUint32E(r.v.Get("auth-sign-key"))
	if err != nil {
		r.bad("auth-sign-key", show(r.v.Get("auth-sign-key")), "a key ID from 0 to 4294967295", nil)
	}
	a.SignKey = id
	for _, p := range r.list("unsigned-peers", "a list of addresses or CIDRs") {
		pfx, err := auth.ParsePeer(p)
		if err != nil {
			r.bad("unsigned-peers", p, "an IPv4 or IPv6 address or CIDR", err)
			continue
		}
		a.UnsignedPeers = append(a.UnsignedPeers, pfx)
	}
	a.Window = auth.DefaultWindow
	window := fmt.Sprintf("a Go duration from %v to %v (the first-contact check cannot be turned off: widen it instead)", minAuthWindow, maxAuthWindow)
	if raw := strings.TrimSpace(r.scalar("auth-window", window)); raw != "" {
		d, err := time.ParseDuration(raw)
		if err != nil || d < minAuthWindow || d > maxAuthWindow {
			r.bad("auth-window", raw, window, nil)
		} else {
			a.Window = d
		}
	}
	a.StateDir = r.scalar("state-dir", "a path")
	return a
}

func checkHostPort(s string) error {
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q out of range", port)
	}
	return nil
}

// referenceValue is the reference key's value as written.
func referenceValue(on bool) string {
	if on {
		return "kernel"
	}
	return "off"
}
