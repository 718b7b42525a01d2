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

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp/auth"
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

	Port          int      // UDP port of TSP (BSD: 525)
	Hostname      string   // name written in packets; empty = the system's
	Interfaces    string   // go-sockaddr template selecting interfaces; empty = BSD's choice
	Peers         []string // host:port list; when set, broadcast becomes unicast fan-out
	Clock         string   // system | dry-run | sim:offset=…,drift=…
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
}

// Auth are the keyed-authentication settings (tsp/auth). Off by default,
// so that BSD daemons, which cannot sign, keep working.
type Auth struct {
	Mode          auth.Mode      // off | optional | required
	KeyFile       string         // chrony-format key file; needed unless Mode is off
	SignKey       uint32         // key ID to sign with; 0: the lowest in the file
	UnsignedPeers []netip.Prefix // optional: the BSD hosts whose unsigned packets are accepted
	// Window is the first-contact timestamp window; 0: tsp/auth's
	// default, negative: no check.
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
}

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
	{"sync-interval", "master's sync round (BSD 240s)", 100 * time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Election.SyncInterval }},
	{"first-sync", "delay from becoming master to the first round (BSD 3s)", 0, time.Hour, func(c *Config) *time.Duration { return &c.Election.FirstSync }},
	{"election-timeout-min", "lower end of the slave's election timer (BSD 360s)", 100 * time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Election.ElectionMin }},
	{"election-timeout-max", "upper end of the slave's election timer (BSD 900s)", 100 * time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Election.ElectionMax }},
	{"fast-election", "own election after an untrusted master was suppressed (BSD 3s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.FastElection }},
	{"candidate-wait", "candidate's wait after the last ACCEPT before it is master (BSD 3s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.CandidateWait }},
	{"accept-window", "time a slave refuses other candidates after an ACCEPT (BSD 30s)", time.Millisecond, time.Hour, func(c *Config) *time.Duration { return &c.Election.AcceptWindow }},
	{"conflict-window", "wait for a second MASTERACK at start-up (BSD 300ms)", time.Millisecond, time.Minute, func(c *Config) *time.Duration { return &c.Election.ConflictWindow }},
	{"no-master-wait", "wait in No Master before becoming master (3s)", 0, time.Hour, func(c *Config) *time.Duration { return &c.Election.NoMasterWait }},
	{"settime-guard", "a SLAVEUP this long after MASTERUP is answered with SETTIME at once (BSD 3s)", 0, time.Hour, func(c *Config) *time.Duration { return &c.Election.SetTimeGuard }},
	{"answer-delay", "upper bound of the random delay before answering a broadcast (BSD 100ms)", 0, time.Minute, func(c *Config) *time.Duration { return &c.Election.AnswerDelay }},
	{"ack-timeout", "first retransmission delay of a reliable send; doubles for 5 copies (BSD 200ms)", time.Millisecond, time.Minute, func(c *Config) *time.Duration { return ackTimeout(c) }},
	{"step-threshold", "corrections at or above are steps, SETTIME (BSD 20s)", time.Millisecond, 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.StepThreshold }},
	{"max-step", "corrections above are refused (1000s)", time.Millisecond, 100 * 365 * 24 * time.Hour, func(c *Config) *time.Duration { return &c.Sync.MaxStep }},
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
	fs.StringSliceP("networks", "n", nil, "use only these networks, CIDR (BSD -n)")
	fs.StringSliceP("ignore-networks", "i", nil, "ignore these networks, CIDR (BSD -i)")
	fs.BoolP("trace", "t", false, "trace packets (BSD -t)")
	fs.BoolP("debug", "d", false, "stay in the foreground and log at debug level (BSD -d)")
	fs.Int("port", 525, "UDP port of TSP")
	fs.String("hostname", "", "name sent in packets (default: the system host name)")
	fs.String("interfaces", "", "go-sockaddr template selecting the interfaces (default: up, broadcast, non-loopback IPv4)")
	fs.StringSlice("peers", nil, "host:port list; broadcast becomes unicast to these peers")
	fs.String("clock", "system", "clock to discipline: system | dry-run | sim:offset=±D,drift=±Nppm")
	fs.String("control-socket", DefaultControlSocket, "unix socket for timedc status")
	fs.String("log-level", "info", "panic | fatal | error | warn | info | debug | trace")
	fs.String("log-format", "text", "text | json")
	fs.String("metrics-listen", "", "host:port for Prometheus metrics (default: off)")
	fs.String("profile", "bsd", "timer defaults: bsd | fast")
	for _, k := range durationKeys {
		fs.String(k.key, "", k.usage+" (Go duration; default from --profile or the clock settings)")
	}
	fs.Bool("frequency-discipline", true, "slaves correct their frequency too (false: BSD behaviour)")
	fs.String("auth", "off", "packet authentication: off | optional (sign; accept unsigned only from --unsigned-peers) | required")
	fs.String("auth-keys", "", "key file, chrony's format (ID TYPE KEY), readable by its owner only")
	fs.Uint32("auth-sign-key", 0, "ID of the key to sign with (default: the lowest in the file)")
	fs.StringSlice("unsigned-peers", nil, "with --auth optional: addresses or CIDRs (BSD hosts) whose unsigned packets are accepted")
	fs.String("auth-window", "", "first-contact timestamp window (Go duration; default 1h; 0 turns the check off)")
	fs.String("state-dir", "", "directory for state kept across restarts (replay protection); the unit sets /var/lib/timed")
}

// Load reads the configuration with flags > environment > file > defaults.
// fs must have been set up by AddFlags and parsed.
func Load(fs *pflag.FlagSet) (*Config, error) {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(fs); err != nil {
		return nil, fmt.Errorf("bind flags: %w", err)
	}
	path := v.GetString("config")
	explicit := fs.Changed("config") || os.Getenv(EnvPrefix+"_CONFIG") != ""
	if path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			var notFound *os.PathError
			if explicit || !errors.As(err, &notFound) {
				return nil, fmt.Errorf("read config %s: %w", path, err)
			}
		}
	}
	return fromViper(v)
}

func fromViper(v *viper.Viper) (*Config, error) {
	c := &Config{}
	var errs []error
	bad := func(key, value, accepted string, err error) {
		errs = append(errs, &Error{Key: key, Value: value, Accepted: accepted, Err: err})
	}
	getBool := func(key string) bool {
		b, err := cast.ToBoolE(v.Get(key))
		if err != nil {
			bad(key, v.GetString(key), "true or false", nil)
		}
		return b
	}

	c.Profile = v.GetString("profile")
	defaults, ok := profiles[c.Profile]
	if !ok {
		bad("profile", c.Profile, "bsd or fast", nil)
		defaults = election.DefaultConfig
	}
	c.Election = defaults("")
	// 50 ms is clocksync.DefaultMaxSourceInfluence: one host alone never
	// makes the master step.
	c.Sync = Sync{StepThreshold: 20 * time.Second, MaxStep: 1000 * time.Second, MaxSourceInfluence: 50 * time.Millisecond}

	c.MayBeMaster = getBool("master")
	c.Trusted = list(v.Get("trusted"))
	if len(c.Trusted) > 0 {
		c.MayBeMaster = true // BSD: -F implies -M
	}
	c.Election.MayBeMaster = c.MayBeMaster // the daemon resolves Trusted to addresses
	c.Networks = prefixes(v, "networks", bad)
	c.IgnoreNetworks = prefixes(v, "ignore-networks", bad)
	if len(c.Networks) > 0 && len(c.IgnoreNetworks) > 0 {
		bad("networks", v.GetString("networks"), "either networks (-n) or ignore-networks (-i), not both", nil)
	}
	c.Trace = getBool("trace")
	c.Debug = getBool("debug")

	port, err := cast.ToIntE(v.Get("port"))
	if err != nil || port < 1 || port > 65535 {
		bad("port", v.GetString("port"), "an integer from 1 to 65535", nil)
	}
	c.Port = port
	c.Hostname = v.GetString("hostname")
	if len(c.Hostname) > 255 {
		bad("hostname", c.Hostname, "at most 255 bytes", nil)
	}
	c.Interfaces = v.GetString("interfaces")
	c.Peers = list(v.Get("peers"))
	for _, p := range c.Peers {
		if err := checkHostPort(p); err != nil {
			bad("peers", p, "host:port with a port from 1 to 65535", err)
		}
	}
	c.Clock = v.GetString("clock")
	if c.Clock != "system" && c.Clock != "dry-run" && !strings.HasPrefix(c.Clock, "sim:") && c.Clock != "sim" {
		bad("clock", c.Clock, "system, dry-run or sim:offset=±D,drift=±Nppm", nil)
	}
	c.ControlSocket = v.GetString("control-socket")
	lvl, err := logrus.ParseLevel(v.GetString("log-level"))
	if err != nil {
		bad("log-level", v.GetString("log-level"), "panic, fatal, error, warn, info, debug or trace", nil)
	}
	c.LogLevel = lvl
	if c.Debug && c.LogLevel < logrus.DebugLevel {
		c.LogLevel = logrus.DebugLevel
	}
	c.LogFormat = v.GetString("log-format")
	if c.LogFormat != "text" && c.LogFormat != "json" {
		bad("log-format", c.LogFormat, "text or json", nil)
	}
	c.MetricsListen = v.GetString("metrics-listen")
	if c.MetricsListen != "" {
		if err := checkHostPort(c.MetricsListen); err != nil {
			bad("metrics-listen", c.MetricsListen, "host:port (host may be empty)", err)
		}
	}
	c.Sync.FrequencyDiscipline = getBool("frequency-discipline")
	c.Auth = authSettings(v, bad)

	for _, k := range durationKeys {
		raw := strings.TrimSpace(v.GetString(k.key))
		if raw == "" {
			continue // keep the profile's default
		}
		d, err := time.ParseDuration(raw)
		accepted := fmt.Sprintf("a Go duration from %v to %v", k.min, k.max)
		if err != nil {
			bad(k.key, raw, accepted, nil)
			continue
		}
		if d < k.min || d > k.max {
			bad(k.key, raw, accepted, nil)
			continue
		}
		*k.field(c) = d
	}
	for i := 1; i < len(c.Election.Retransmit); i++ {
		c.Election.Retransmit[i] = 2 * c.Election.Retransmit[i-1]
	}
	e := &c.Election
	if e.ElectionMin > e.ElectionMax {
		bad("election-timeout-min", e.ElectionMin.String(), "at most election-timeout-max ("+e.ElectionMax.String()+")", nil)
	}
	if e.ElectionMin <= e.SyncInterval {
		// TEMPO: a slave must hear at least one round before it suspects the master.
		bad("election-timeout-min", e.ElectionMin.String(), "more than sync-interval ("+e.SyncInterval.String()+")", nil)
	}
	if e.AcceptWindow >= e.ElectionMin {
		bad("accept-window", e.AcceptWindow.String(), "less than election-timeout-min ("+e.ElectionMin.String()+")", nil)
	}
	if e.AnswerDelay >= e.CandidateWait {
		bad("answer-delay", e.AnswerDelay.String(), "less than candidate-wait ("+e.CandidateWait.String()+")", nil)
	}
	if c.Sync.StepThreshold > c.Sync.MaxStep {
		bad("step-threshold", c.Sync.StepThreshold.String(), "at most max-step ("+c.Sync.MaxStep.String()+")", nil)
	}
	if len(errs) == 0 {
		// The election package has the last word on its own invariants;
		// the name is the daemon's to fill in, so check with a stand-in.
		e := c.Election
		e.Name = "config-check"
		if err := e.Validate(); err != nil {
			bad("timers", "", "values the election accepts", err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
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

func prefixes(v *viper.Viper, key string, bad func(key, value, accepted string, err error)) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range list(v.Get(key)) {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			// BSD accepted a bare network number; take an address as its /32.
			a, aerr := netip.ParseAddr(s)
			if aerr != nil || !a.Is4() {
				bad(key, s, "IPv4 networks in CIDR form, e.g. 192.0.2.0/24", err)
				continue
			}
			p = netip.PrefixFrom(a, 32)
		}
		if !p.Addr().Is4() {
			bad(key, s, "IPv4 networks in CIDR form (TSP is IPv4 only)", nil)
			continue
		}
		out = append(out, p.Masked())
	}
	return out
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

// Setting is one effective value and where it came from, for `timed config`.
type Setting struct {
	Key, Value, Source string
}

// Effective lists every key with its effective value and source (flag,
// env, file or default), sorted by key.
func Effective(fs *pflag.FlagSet, c *Config) []Setting {
	values := map[string]string{
		"master": strconv.FormatBool(c.MayBeMaster), "trusted": strings.Join(c.Trusted, ","),
		"networks": joinPrefixes(c.Networks), "ignore-networks": joinPrefixes(c.IgnoreNetworks),
		"trace": strconv.FormatBool(c.Trace), "debug": strconv.FormatBool(c.Debug),
		"port": strconv.Itoa(c.Port), "hostname": c.Hostname, "interfaces": c.Interfaces,
		"peers": strings.Join(c.Peers, ","), "clock": c.Clock, "control-socket": c.ControlSocket,
		"log-level": c.LogLevel.String(), "log-format": c.LogFormat, "metrics-listen": c.MetricsListen,
		"profile": c.Profile, "frequency-discipline": strconv.FormatBool(c.Sync.FrequencyDiscipline),
		"auth": c.Auth.Mode.String(), "auth-keys": c.Auth.KeyFile, "auth-sign-key": strconv.FormatUint(uint64(c.Auth.SignKey), 10),
		"unsigned-peers": joinPrefixes(c.Auth.UnsignedPeers), "auth-window": c.Auth.Window.String(), "state-dir": c.Auth.StateDir,
	}
	for _, k := range durationKeys {
		values[k.key] = k.field(c).String()
	}
	v := viper.New()
	if path, _ := fs.GetString("config"); path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		_ = v.ReadInConfig() // already read once by Load; here only to name sources
	}
	var out []Setting
	for key, val := range values {
		src := "default"
		switch {
		case fs.Changed(key):
			src = "flag"
		case os.Getenv(EnvPrefix+"_"+strings.ToUpper(strings.ReplaceAll(key, "-", "_"))) != "":
			src = "env"
		case v.InConfig(key):
			src = "file"
		}
		out = append(out, Setting{Key: key, Value: val, Source: src})
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

// authSettings reads the auth keys; each bad value is reported with its
// key and what is accepted.
func authSettings(v *viper.Viper, bad func(key, value, accepted string, err error)) Auth {
	var a Auth
	mode, err := auth.ParseMode(v.GetString("auth"))
	if err != nil {
		bad("auth", v.GetString("auth"), "off, optional or required", nil)
	}
	a.Mode = mode
	a.KeyFile = v.GetString("auth-keys")
	if a.Mode != auth.Off && a.KeyFile == "" {
		bad("auth-keys", "", "a key file when auth is "+a.Mode.String(), nil)
	}
	id, err := cast.ToUint32E(v.Get("auth-sign-key"))
	if err != nil {
		bad("auth-sign-key", v.GetString("auth-sign-key"), "a key ID from 0 to 4294967295", nil)
	}
	a.SignKey = id
	for _, p := range list(v.Get("unsigned-peers")) {
		pfx, err := auth.ParsePeer(p)
		if err != nil {
			bad("unsigned-peers", p, "an IPv4 address or CIDR", err)
			continue
		}
		a.UnsignedPeers = append(a.UnsignedPeers, pfx)
	}
	if raw := strings.TrimSpace(v.GetString("auth-window")); raw != "" {
		d, err := time.ParseDuration(raw)
		switch {
		case err != nil || d < 0:
			bad("auth-window", raw, "a Go duration ≥ 0 (0 turns the first-contact check off)", nil)
		case d == 0:
			a.Window = auth.NoWindow
		default:
			a.Window = d
		}
	}
	a.StateDir = v.GetString("state-dir")
	return a
}
