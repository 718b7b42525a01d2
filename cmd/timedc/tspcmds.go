package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

// resolve turns "host" or "host:port" into a UDP address, the port
// defaulting to --port; IPv6 addresses as 2001:db8::1, [2001:db8::1]:525
// or fe80::1%eth0, a host name to its first address (IPv4 first).
func (o *options) resolve(host string) (*net.UDPAddr, error) {
	hostport := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		hostport = net.JoinHostPort(host, strconv.Itoa(o.port))
	}
	addr, err := net.ResolveUDPAddr("udp", hostport)
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
// skipped, like BSD's timedc does with stray packets. With want nil it
// waits only for an ICMP error (see roundTrip).
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

// roundTrip sends one datagram from a fresh socket connected to addr and
// reads addr's answers until accept takes one or wait (or ctx) runs out.
//
// The socket is connected so that the kernel hands it the ICMP errors
// about addr: where nothing listens, the host answers port unreachable
// and the read fails at once with ECONNREFUSED instead of waiting out
// the timeout. With accept nil (a request that has no reply, as TEST) it
// waits only for such an error: none within wait is success, the only
// one a sender can see.
func (o *options) roundTrip(ctx context.Context, addr *net.UDPAddr, b []byte, wait time.Duration, accept func([]byte) bool) error {
	conn, err := dial(addr, needsReservedPort(b))
	if err != nil {
		return err
	}
	defer conn.Close()
	if b, err = o.sign(b); err != nil {
		return err
	}
	if _, err := conn.Write(b); err != nil {
		return unreachable(addr, err)
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
		n, err := conn.Read(buf)
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout() && accept == nil:
				return nil // no error came back
			case errors.As(err, &ne) && ne.Timeout():
				return fmt.Errorf("communication error with %v: no answer in %v", addr, wait)
			}
			return unreachable(addr, err)
		}
		if accept == nil {
			continue // an answer to a request that has none: not ours to read
		}
		d := buf[:n]
		if p, _, err := auth.Split(d); err == nil {
			d = p // a signed answer: timedc reads it, the trailer aside
		}
		if accept(d) {
			return nil
		}
	}
}

// errNoTimed: the host answered with ICMP port unreachable, so no timed
// listens on that port.
var errNoTimed = errors.New("port unreachable")

// unreachable says what an error on the connected socket means: the
// ICMP error the host or a router sent back, if that is what it is.
func unreachable(addr *net.UDPAddr, err error) error {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no timed at %v (%w)", addr, errNoTimed)
	case errors.Is(err, syscall.EHOSTUNREACH):
		return fmt.Errorf("%v is unreachable (host unreachable)", addr)
	case errors.Is(err, syscall.ENETUNREACH):
		return fmt.Errorf("%v is unreachable (network unreachable)", addr)
	}
	return fmt.Errorf("communication error with %v: %w", addr, err)
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

// dial opens a UDP socket connected to addr; with reserved, bound first
// to a free reserved port (1023 down to 600, as rresvport does).
func dial(addr *net.UDPAddr, reserved bool) (*net.UDPConn, error) {
	if !reserved {
		return net.DialUDP("udp", nil, addr)
	}
	var last error
	for port := 1023; port >= 600; port-- {
		conn, err := net.DialUDP("udp", &net.UDPAddr{Port: port}, addr)
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
			return o.forEachHost([]string{host}, func(h string) (string, map[string]any, error) {
				addr, err := o.resolve(h)
				if err != nil {
					return "", nil, err
				}
				seq := uint16(time.Now().UnixNano())
				p := tsp.Packet{Type: typ, Version: tsp.Version, Seq: seq, Name: ownName()}
				if _, err := o.exchange(cmd.Context(), addr, p, o.wait(5*time.Second),
					func(r tsp.Packet) bool { return r.Type == tsp.Ack && r.Seq == seq }); err != nil {
					return "", nil, err
				}
				word := map[tsp.Type]string{tsp.TraceOn: "enabled", tsp.TraceOff: "disabled"}[typ]
				return "timed tracing " + word, map[string]any{"trace": typ == tsp.TraceOn}, nil
			})
		},
	}
}

// testWait is how long election waits for an ICMP error after its TEST,
// which has no reply: on a LAN the error comes back in milliseconds.
const testWait = 500 * time.Millisecond

func electionCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "election host...",
		Short: "make the daemon on each host start an election now (slaves) or a sync round (masters)",
		Long: `election sends TEST to the daemon on each host. TEST has no reply (BSD), so
timedc can only wait a moment for the host to say that nothing listens
(ICMP port unreachable), which is an error; if nothing comes back it
reports the request sent, not answered.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, hosts []string) error {
			return o.forEachHost(hosts, func(h string) (string, map[string]any, error) {
				addr, err := o.resolve(h)
				if err != nil {
					return "", nil, err
				}
				p := tsp.Packet{Type: tsp.Test, Version: tsp.Version, Name: ownName()}
				if _, err := o.exchange(cmd.Context(), addr, p, o.wait(testWait), nil); err != nil {
					return "", nil, err
				}
				return "election requested at " + h + " (sent; TEST has no reply, so nothing confirms it)",
					map[string]any{"sent": true, "answered": false}, nil
			})
		},
	}
}
