// Package control is the daemon's local admin API: newline-delimited JSON
// over a unix stream socket (default /run/timed/timed.sock, mode 0660).
// timedc speaks it for `status` and `step`; the daemon serves it. Both sides share
// these types so the JSON cannot drift between them.
package control

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// Commands a client may send.
const (
	CmdStatus   = "status"
	CmdTrace    = "trace"    // with On
	CmdElection = "election" // force an election now (BSD's TEST)
	CmdQuit     = "quit"     // stop the daemon
	// CmdStep steps the host's clock by Step, or with ToNetwork by the
	// alarm's offset, whatever max-step says: the operator's decision,
	// left to whoever may write to the socket (mode 0660).
	CmdStep = "step"
	// CmdSources lists the hosts this daemon measures or follows
	// (timedc sources).
	CmdSources = "sources"
)

// Request is one command.
type Request struct {
	Cmd       string `json:"cmd"`
	On        bool   `json:"on,omitempty"`
	Step      string `json:"step,omitempty"`       // CmdStep: a Go duration, e.g. "-4995s"
	ToNetwork bool   `json:"to_network,omitempty"` // CmdStep: by the alarm's offset instead
}

// Response answers one Request. Error is set, and OK false, when the
// command failed.
type Response struct {
	OK      bool        `json:"ok"`
	Error   string      `json:"error,omitempty"`
	Status  *Status     `json:"status,omitempty"`
	Step    *StepResult `json:"step,omitempty"`
	Sources *Sources    `json:"sources,omitempty"`
}

// StepResult is what CmdStep did.
type StepResult struct {
	Correction Correction `json:"correction"`
	// AlarmWas is the alarm the step ended; nil if there was none.
	AlarmWas *Alarm `json:"alarm_was,omitempty"`
	// Simulated clocks only: the clock's offset from the kernel clock
	// before and after.
	OffsetBeforeSecs *float64 `json:"clock_offset_before_seconds,omitempty"`
	OffsetAfterSecs  *float64 `json:"clock_offset_after_seconds,omitempty"`
}

// MaxOperatorStep bounds CmdStep: a step of more than a century is a typo.
const MaxOperatorStep = 100 * 365 * 24 * time.Hour

// ErrBadStep: a step of nothing or of more than MaxOperatorStep.
var ErrBadStep = errors.New("refusing step")

// CheckStep refuses the steps no operator means; timedc checks before
// asking and the daemon again.
func CheckStep(d time.Duration) error {
	switch {
	case d == 0:
		return fmt.Errorf("%w of 0s: nothing to do", ErrBadStep)
	case d > MaxOperatorStep || d < -MaxOperatorStep:
		return fmt.Errorf("%w of %v: more than %v (100 years)", ErrBadStep, d, MaxOperatorStep)
	}
	return nil
}

// Status is what `timedc status` shows. Durations are in seconds (float)
// so scripts need no Go duration parser.
//
// On several networks each entry of Networks has the daemon's state,
// master and slaves there; the top-level State, Master, StateSince,
// LastElection and Slaves are those of the network that stands for the
// host: the one it is a slave on (its slavenet), else the first it is
// master of, else the first. Elections counts those of every network.
type Status struct {
	// Sync is the clock's live state: synchronised or not, its offset
	// from network time and how that is known. State, Master, StateSince,
	// Elections and Slaves are the first network's (each network's state
	// and master are in Networks).
	Sync         *Sync     `json:"sync,omitempty"`
	State        string    `json:"state"` // lower case: "master", "slave", "candidate", …
	Hostname     string    `json:"hostname"`
	Clock        string    `json:"clock"`
	MayBeMaster  bool      `json:"may_be_master"`
	Networks     []Network `json:"networks"`
	Master       *Peer     `json:"master,omitempty"`
	StateSince   time.Time `json:"state_since"`
	InStateSecs  float64   `json:"time_in_state_seconds"`
	Elections    uint64    `json:"elections_seen"`
	LastElection float64   `json:"last_election_seconds,omitempty"`
	Slaves       []Slave   `json:"slaves,omitempty"`
	// Alarm is set while corrections beyond max-step are asked of this
	// host's clock (omitted otherwise): see Alarm.
	Alarm *Alarm `json:"alarm,omitempty"`
	// KernelSync is the sync state the daemon last told the kernel
	// (--clock system with kernel-sync-status); omitted where it leaves
	// the kernel alone.
	KernelSync *KernelSync `json:"kernel_sync,omitempty"`
	// Reference is this host's own reference state (--reference kernel);
	// omitted on other hosts.
	Reference *Reference `json:"reference,omitempty"`
	// LastCorrection is the last correction this host applied to its clock.
	LastCorrection *Correction        `json:"last_correction,omitempty"`
	FrequencyPPM   float64            `json:"frequency_ppm"`
	OffsetSecs     float64            `json:"clock_offset_seconds"` // simulated clocks only: offset from the kernel clock
	Trace          bool               `json:"trace"`
	Packets        map[string]Counter `json:"packets"`
	Drops          map[string]uint64  `json:"drops"`
	UptimeSecs     float64            `json:"uptime_seconds"`
	// LoopsDetected counts BSD's "loop detected" cases: a LOOP with our
	// own name back from the master we follow (a cycle of gateways), or
	// a LOOP from another master on a network we master.
	LoopsDetected uint64 `json:"loops_detected"`
}

// Network is one network the daemon found: with Served, one it takes
// part in, with its role there (a host may be master on some networks and
// slave on one, as BSD's).
type Network struct {
	Interface string `json:"interface,omitempty"`
	Address   string `json:"address"`
	Prefix    string `json:"prefix,omitempty"`
	Broadcast string `json:"broadcast,omitempty"` // IPv4
	Group     string `json:"group,omitempty"`     // IPv6: the link-local group that stands for broadcast
	// Note says what the network cannot do ("IPv6: probe only, no BSD
	// daemons"): ICMP timestamps, BSD's way to measure, are IPv4 only,
	// as BSD's timed is.
	Note   string `json:"note,omitempty"`
	Served bool   `json:"served"`
	// State is the daemon's election state on this network ("master",
	// "slave", …), "ignore" where it leaves the network to a master it
	// does not follow (BSD's IGNORE: another way into the same time), or
	// "ignored" where it does not serve the network at all.
	State string `json:"state,omitempty"`
	// Master is the master it follows here, or itself where it is master.
	Master *Peer   `json:"master,omitempty"`
	Slaves []Slave `json:"slaves,omitempty"` // where it is master
	// RoundIntervalSecs, where it is master, is the interval its sync
	// rounds run at now: adaptive rounds' (from sync-interval-min up to
	// sync-interval), or the sync-interval when fixed.
	RoundIntervalSecs float64 `json:"round_interval_seconds,omitempty"`
	// Slavenet: the one network the daemon is a slave on, whose master's
	// corrections its clock takes.
	Slavenet bool `json:"slavenet,omitempty"`
	// Link, on a link served on both families (--family both), says
	// which side this network is and where the other is: "IPv6 side of
	// dual-stack eth0, with 10.0.0.5" (one election across both).
	Link string `json:"link,omitempty"`
}

// KernelSync is what the daemon last wrote to the kernel's sync state
// (adjtimex: STA_UNSYNC, maxerror, esterror), and when.
type KernelSync struct {
	// Synchronised: STA_UNSYNC cleared; false: set.
	Synchronised bool `json:"synchronised"`
	// MaxErrorSecs and EstErrorSecs are maxerror and esterror as written
	// (the kernel adds 500 µs a second to maxerror from then on).
	MaxErrorSecs float64   `json:"maxerror_seconds"`
	EstErrorSecs float64   `json:"esterror_seconds"`
	At           time.Time `json:"at"`
	AgeSecs      float64   `json:"age_seconds"`
	// Error is why the last write failed; the state above is the last
	// one written.
	Error string `json:"error,omitempty"`
}

// Reference is a reference host's own state (--reference kernel): what
// the kernel last said of its clock, kept by another program, and
// whether the host claims to be a reference (docs/operating.md, "UTC on
// the LAN").
type Reference struct {
	// Claiming: the kernel has said synchronised within MaxErrorBound
	// (with the hold's hysteresis); the host serves its clock as the
	// network time when master, and its election outranks others'.
	Claiming bool `json:"claiming"`
	// KernelSynchronised and KernelMaxErrorSecs are the kernel's last
	// reading (STA_UNSYNC clear; maxerror), at CheckedAt; Error why it
	// could not be read.
	KernelSynchronised bool      `json:"kernel_synchronised"`
	KernelMaxErrorSecs float64   `json:"kernel_maxerror_seconds"`
	MaxErrorBoundSecs  float64   `json:"maxerror_bound_seconds"`
	CheckedAt          time.Time `json:"checked_at"`
	Error              string    `json:"error,omitempty"`
	// CorrectionsIgnored counts the corrections this host was asked to
	// make to its clock and did not.
	CorrectionsIgnored int `json:"corrections_ignored"`
}

// Sync states (Sync.State). docs/operating.md, "Is it synchronised?", defines them.
const (
	Synchronised   = "synchronised"
	Unsynchronised = "unsynchronised"
	InAlarm        = "alarm"
)

// Sync is the live state of the host's clock. Ages are in seconds, taken
// when the status was.
type Sync struct {
	// State is Synchronised, Unsynchronised or InAlarm; Reason says why,
	// for a person.
	State  string `json:"state"`
	Reason string `json:"reason"`
	// OffsetSecs estimates this clock minus network time now (positive:
	// ahead); omitted when nothing is known. ErrorBoundSecs bounds its
	// error where this host can know it: on a master, from its round's
	// measurements; a slave's offset was measured by its master, which
	// alone knows that measurement's error, so it is omitted there.
	OffsetSecs     *float64 `json:"offset_seconds,omitempty"`
	ErrorBoundSecs *float64 `json:"error_bound_seconds,omitempty"`
	// Basis is where the estimate comes from: "round" (a master's last
	// sync round), "correction" (the last correction applied, from
	// BasisFrom), "alone" (a master without slaves: its clock is the
	// network time), "alarm" (the alarm's offset) or "none".
	Basis        string   `json:"basis"`
	BasisFrom    string   `json:"basis_from,omitempty"`
	BasisAgeSecs *float64 `json:"basis_age_seconds,omitempty"`
	// PendingSlewSecs is what is still to be slewed of that correction
	// (at adjtime's 500 ppm): the estimate counts it as not yet done.
	PendingSlewSecs float64 `json:"pending_slew_seconds"`
	// UTCVia is the reference host this host's time comes from (docs/operating.md,
	// "UTC on the LAN"): the master it follows, which claims to be a
	// reference, or itself; omitted elsewhere. ReferenceMaxErrorSecs is
	// that host's kernel maxerror (its bound on its distance from UTC)
	// and UTCBoundSecs this host's bound on its own distance from UTC:
	// the reference's maxerror, plus this host's offset from it and that
	// offset's error bound (a slave's grows from clocksync's least
	// measurement error since its last correction), while synchronised.
	UTCVia                string   `json:"utc_via,omitempty"`
	ReferenceMaxErrorSecs *float64 `json:"reference_maxerror_seconds,omitempty"`
	UTCBoundSecs          *float64 `json:"utc_bound_seconds,omitempty"`
	// LastCorrectionAgeSecs: since the last correction applied to the
	// clock (Status.LastCorrection says which).
	LastCorrectionAgeSecs *float64 `json:"last_correction_age_seconds,omitempty"`
	// FrequencyPPM is the frequency discipline's setting (the clock's,
	// without a discipline); FrequencyChangePPM its last change, made
	// FrequencyChangeAgeSecs ago; FrequencyEstimates how many rate
	// estimates the discipline has taken in since start.
	FrequencyPPM           float64  `json:"frequency_ppm"`
	FrequencyChangePPM     float64  `json:"frequency_change_ppm"`
	FrequencyChangeAgeSecs *float64 `json:"frequency_change_age_seconds,omitempty"`
	FrequencyEstimates     int      `json:"frequency_estimates"`
	// SyncIntervalSecs is the sync interval the state is judged by.
	SyncIntervalSecs float64 `json:"sync_interval_seconds"`
}

// Sources answers CmdSources: the hosts this daemon measures (as master,
// its slaves) or follows (as slave, its master).
type Sources struct {
	Hostname string   `json:"hostname"`
	Sources  []Source `json:"sources"`
}

// Source is one host of Sources. Offsets are its clock minus this one
// (positive: it is ahead), as clockdiff's.
type Source struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Network string `json:"network"`
	// Role is what the host is to this one: "slave" (measured every
	// round) or "master" (its corrections set this clock).
	Role string `json:"role"`
	// State: for a slave "kept" (its offset counted in the network time),
	// "outlier" (measured, left out: beyond the window of the median),
	// "measured" (no vote that round: a date change), "unreachable" (not
	// measured in the last round) or "new" (not measured yet); for a
	// master "current" (a correction within 2 sync intervals), "silent"
	// or "new" (no correction yet).
	State string `json:"state"`
	// Reach is a shift register of the last 8 rounds, bit 0 the latest:
	// set when the slave was measured, or the master's correction came.
	Reach uint8 `json:"reach"`
	// The last measurement: for a slave, the master's (this host's); for
	// a master, its correction (network time minus this clock as it
	// measured it), whose error and round trip only it knows.
	OffsetSecs     *float64 `json:"offset_seconds,omitempty"`
	ErrorBoundSecs *float64 `json:"error_bound_seconds,omitempty"`
	RTTSecs        *float64 `json:"rtt_seconds,omitempty"`
	// ReferenceMaxErrorSecs: a master that claims to be a reference
	// (docs/operating.md, "UTC on the LAN"), with the kernel maxerror it announced.
	ReferenceMaxErrorSecs *float64 `json:"reference_maxerror_seconds,omitempty"`
	AgeSecs               *float64 `json:"age_seconds,omitempty"`
	// Method is how the offset was measured: "probe" (ours) or "icmp"
	// (ICMP timestamps, for BSD daemons); for a master, how it measures
	// this host (its probes seen here, or else ICMP, which the kernel
	// answers).
	Method string `json:"method,omitempty"`
	// Stamps is how the send times of a slave's last probe measurement
	// were taken: "kernel" (the kernel's transmit timestamps on both
	// sides), "user" (clock readings before the write on both), "mixed"
	// (kernel stamps on one side only, e.g. a peer without them).
	Stamps   string `json:"stamps,omitempty"`
	Failures int    `json:"failures,omitempty"`
}

// Peer names another daemon.
type Peer struct {
	Name    string `json:"name"`
	Address string `json:"address"`
}

// Slave is what the master knows of one slave.
type Slave struct {
	Peer
	OffsetSecs     float64   `json:"offset_seconds"`
	ErrorBoundSecs float64   `json:"error_bound_seconds"`
	RTTSecs        float64   `json:"rtt_seconds"`
	LastSeen       time.Time `json:"last_seen"`
	Failures       int       `json:"failures,omitempty"`
	State          string    `json:"state"`            // as Source.State
	Reach          uint8     `json:"reach"`            // as Source.Reach
	Method         string    `json:"method"`           // probe or icmp; "" before the first measurement
	Stamps         string    `json:"stamps,omitempty"` // as Source.Stamps
}

// Alarm: the host's clock is further from network time than max-step. The
// daemon still moves it there by max-step at most once a round (when the
// correction is confirmed as towards network time) and refuses the rest;
// `timedc step` steps it at once.
type Alarm struct {
	Since       time.Time `json:"since"`          // the clock's reading when it went on
	OffsetSecs  float64   `json:"offset_seconds"` // how far the clock is from network time (positive: ahead)
	Refused     int       `json:"refused"`        // corrections refused since it went on
	MaxStepSecs float64   `json:"max_step_seconds"`
}

// Correction is one applied clock correction.
type Correction struct {
	Kind string    `json:"kind"` // "slew" or "step"
	Secs float64   `json:"seconds"`
	At   time.Time `json:"at"`
	// From is who asked: the master's name, this host's for a master's
	// own share, "operator" for timedc step.
	From string `json:"from,omitempty"`
}

// Counter counts packets of one type.
type Counter struct {
	Rx uint64 `json:"rx"`
	Tx uint64 `json:"tx"`
}

// Handler answers requests on the daemon side. It is called from the
// server's connection goroutines and must be safe for concurrent use.
type Handler func(ctx context.Context, req Request) Response

// maxLine bounds a request line: commands are tiny, and a local client
// must not be able to make the daemon buffer without limit.
const maxLine = 64 << 10

// Server serves the control socket.
type Server struct {
	ln      net.Listener
	handler Handler
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
}

// Listen creates the socket at path with mode 0660, replacing a stale
// socket left by a daemon that died, but never a live one.
func Listen(path string, h Handler) (*Server, error) {
	if c, err := net.DialTimeout("unix", path, 200*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s: another timed is answering there", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("control socket %s: remove stale socket: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket %s: %w (is its directory there and writable? see --control-socket)", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: chmod: %w", path, err)
	}
	s := &Server{ln: ln, handler: h, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the socket's path.
func (s *Server) Addr() string { return s.ln.Addr().String() }

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

func (s *Server) serve(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 4096), maxLine)
	enc := json.NewEncoder(c)
	for sc.Scan() {
		var req Request
		resp := Response{}
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			resp.Error = fmt.Sprintf("bad request: %v", err)
		} else {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp = s.handler(ctx, req)
			cancel()
		}
		if err := enc.Encode(resp); err != nil {
			return
		}
	}
}

// Close stops accepting, closes every connection, waits for their
// goroutines and removes the socket file.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close() // a unix listener also unlinks its path
	s.wg.Wait()
	return err
}

// Call sends one request to the daemon at path and returns its response.
// A failed command comes back as an error carrying the daemon's message.
func Call(ctx context.Context, path string, req Request) (*Response, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("connect to timed at %s: %w (is timed running? see --control-socket)", path, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if err := json.NewEncoder(c).Encode(req); err != nil {
		return nil, fmt.Errorf("send %s to %s: %w", req.Cmd, path, err)
	}
	var resp Response
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&resp); err != nil {
		return nil, fmt.Errorf("read answer to %s from %s: %w", req.Cmd, path, err)
	}
	if !resp.OK {
		return &resp, fmt.Errorf("timed: %s", resp.Error)
	}
	return &resp, nil
}
