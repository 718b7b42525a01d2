package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

// resolve turns "host" or "host:port" into a UDP address, the port
// defaulting to --port.
func (o *options) resolve(host string) (*net.UDPAddr, error) {
	hostport := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		hostport = net.JoinHostPort(host, strconv.Itoa(o.port))
	}
	addr, err := net.ResolveUDPAddr("udp4", hostport)
	if err != nil {
		return nil, fmt.Errorf("%s: unknown host: %w", host, err)
	}
	return addr, nil
}

func ownName() string {
	h, err := os.Hostname()
	if err != nil {
		return "timedc"
	}
	return tsp.TruncateName(h)
}

// exchange sends p to addr and, if want is not nil, waits until wait has
// passed for a reply that want accepts. Replies it does not want are
// skipped, like BSD's timedc does with stray packets.
func (o *options) exchange(ctx context.Context, addr *net.UDPAddr, p tsp.Packet, wait time.Duration, want func(tsp.Packet) bool) (tsp.Packet, error) {
	b, err := p.Marshal()
	if err != nil {
		return tsp.Packet{}, err
	}
	var reply tsp.Packet
	var accept func([]byte) bool
	if want != nil {
		accept = func(d []byte) bool {
			r, err := tsp.Unmarshal(d)
			if err != nil || !want(r) {
				return false // BSD: "wrong/unknown ack received"; keep waiting for a good one
			}
			reply = r
			return true
		}
	}
	if err := o.roundTrip(ctx, addr, b, wait, accept); err != nil {
		return tsp.Packet{}, err
	}
	return reply, nil
}

// roundTrip sends one datagram from a fresh socket and, if accept is not
// nil, reads the answers from addr's host until accept takes one or wait
// (or ctx) runs out.
func (o *options) roundTrip(ctx context.Context, addr *net.UDPAddr, b []byte, wait time.Duration, accept func([]byte) bool) error {
	open := func() (*net.UDPConn, error) { return net.ListenUDP("udp4", nil) }
	if needsReservedPort(b) {
		open = listenReserved
	}
	conn, err := open()
	if err != nil {
		return err
	}
	defer conn.Close()
	if b, err = o.sign(b); err != nil {
		return err
	}
	if _, err := conn.WriteToUDP(b, addr); err != nil {
		return fmt.Errorf("send to %v: %w", addr, err)
	}
	if accept == nil {
		return nil
	}
	deadline := time.Now().Add(wait)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	if err := conn.SetReadDeadline(deadline); err != nil {
		return err
	}
	buf := make([]byte, 64<<10)
	for {
		n, from, err := conn.ReadFromUDP(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("communication error with %v: no answer in %v", addr, wait)
			}
			return fmt.Errorf("communication error with %v: %w", addr, err)
		}
		d := buf[:n]
		if p, _, err := auth.Split(d); err == nil {
			d = p // a signed answer: timedc reads it, the trailer aside
		}
		if from.IP.Equal(addr.IP) && accept(d) {
			return nil
		}
	}
}

// needsReservedPort: our daemons obey TRACEON/TRACEOFF, TEST and SETDATE
// from the network only from a reserved port on their own host (BSD's
// timedc and date(1) are setuid root for the same reason).
func needsReservedPort(b []byte) bool {
	if len(b) < 2 || b[1] != tsp.Version {
		return false
	}
	switch tsp.Type(b[0]) {
	case tsp.TraceOn, tsp.TraceOff, tsp.Test, tsp.SetDate:
		return true
	}
	return false
}

// listenReserved opens a UDP socket on a free reserved port (1023 down to
// 600, as rresvport does).
func listenReserved() (*net.UDPConn, error) {
	var last error
	for port := 1023; port >= 600; port-- {
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		if err == nil {
			return conn, nil
		}
		if errors.Is(err, syscall.EACCES) {
			return nil, fmt.Errorf("this command must come from a reserved port: run timedc as root (or with CAP_NET_BIND_SERVICE), on the daemon's host: %w", err)
		}
		last = err
	}
	return nil, fmt.Errorf("no free reserved UDP port: %w", last)
}

func msiteCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "msite [host...]",
		Short: "find the master timed of each host (default: this host)",
		RunE: func(cmd *cobra.Command, hosts []string) error {
			if len(hosts) == 0 {
				hosts = []string{"localhost"}
			}
			return o.forEachHost(hosts, func(h string) (string, map[string]any, error) {
				master, err := msite(cmd.Context(), o, h)
				if err != nil {
					return "", nil, err
				}
				return fmt.Sprintf("master timedaemon at %s is %s", h, master), map[string]any{"master": master}, nil
			})
		},
	}
}

func msite(ctx context.Context, o *options, host string) (string, error) {
	addr, err := o.resolve(host)
	if err != nil {
		return "", err
	}
	p := tsp.Packet{Type: tsp.MSite, Version: tsp.Version, Name: ownName()}
	reply, err := o.exchange(ctx, addr, p, o.wait(15*time.Second), func(r tsp.Packet) bool { return r.Type == tsp.Ack })
	if err != nil {
		return "", err
	}
	return reply.Name, nil
}

func traceCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:       "trace on|off [host]",
		Short:     "turn packet tracing of a daemon on or off (default: this host's)",
		Args:      cobra.RangeArgs(1, 2),
		ValidArgs: []string{"on", "off"},
		RunE: func(cmd *cobra.Command, args []string) error {
			var typ tsp.Type
			switch args[0] {
			case "on":
				typ = tsp.TraceOn
			case "off":
				typ = tsp.TraceOff
			default:
				return fmt.Errorf("trace takes on or off, not %q", args[0])
			}
			host := "localhost"
			if len(args) == 2 {
				host = args[1]
			}
			addr, err := o.resolve(host)
			if err != nil {
				return err
			}
			seq := uint16(time.Now().UnixNano())
			p := tsp.Packet{Type: typ, Version: tsp.Version, Seq: seq, Name: ownName()}
			if _, err := o.exchange(cmd.Context(), addr, p, o.wait(5*time.Second),
				func(r tsp.Packet) bool { return r.Type == tsp.Ack && r.Seq == seq }); err != nil {
				return err
			}
			word := map[tsp.Type]string{tsp.TraceOn: "enabled", tsp.TraceOff: "disabled"}[typ]
			return o.emit(map[string]any{"host": host, "trace": typ == tsp.TraceOn},
				"timed tracing "+word)
		},
	}
}

func electionCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "election host...",
		Short: "make the daemon on each host start an election now (slaves) or a sync round (masters)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, hosts []string) error {
			return o.forEachHost(hosts, func(h string) (string, map[string]any, error) {
				addr, err := o.resolve(h)
				if err == nil {
					// TEST has no reply (BSD); a send error is all we can see.
					_, err = o.exchange(cmd.Context(), addr, tsp.Packet{Type: tsp.Test, Version: tsp.Version, Name: ownName()}, 0, nil)
				}
				return "election requested at " + h, map[string]any{"sent": err == nil}, err
			})
		},
	}
}

// forEachHost runs one query per host. Text output has a line per host
// that answered; with --json every host gets an object with "host" (and
// "error" where it failed). Failures make one error line and a non-zero
// exit, so scripts see them.
func (o *options) forEachHost(hosts []string, query func(host string) (line string, fields map[string]any, err error)) error {
	var results []map[string]any
	var lines, failures []string
	for _, h := range hosts {
		line, fields, err := query(h)
		if fields == nil {
			fields = map[string]any{}
		}
		fields["host"] = h
		if err != nil {
			fields["error"] = err.Error()
			failures = append(failures, err.Error())
		} else {
			lines = append(lines, line)
		}
		results = append(results, fields)
	}
	if o.json || len(lines) > 0 {
		if err := o.emit(results, strings.Join(lines, "\n")); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}
