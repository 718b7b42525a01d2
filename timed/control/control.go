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
	OK     bool        `json:"ok"`
	Error  string      `json:"error,omitempty"`
	Status *Status     `json:"status,omitempty"`
	Step   *StepResult `json:"step,omitempty"`
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

// Network is one network the daemon serves, and its role there.
type Network struct {
	Interface string `json:"interface,omitempty"`
	Address   string `json:"address"`
	Prefix    string `json:"prefix,omitempty"`
	Broadcast string `json:"broadcast,omitempty"`
	// State is the daemon's election state on this network ("master",
	// "slave", …), or "ignore" where it leaves the network to a master it
	// does not follow (BSD's IGNORE: another way into the same time).
	State string `json:"state,omitempty"`
	// Master is the master it follows here, or itself where it is master.
	Master *Peer   `json:"master,omitempty"`
	Slaves []Slave `json:"slaves,omitempty"` // where it is master
	// Slavenet: the one network the daemon is a slave on, whose master's
	// corrections its clock takes.
	Slavenet bool `json:"slavenet,omitempty"`
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
