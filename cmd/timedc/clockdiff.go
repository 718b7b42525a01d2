package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/tsp"
)

// clockdiff measures each host's clock against this host's, as BSD's
// timedc does: with our nanosecond probe where the daemon answers it, with
// ICMP timestamps (RFC 792, millisecond resolution, needs CAP_NET_RAW)
// otherwise. It only reads the local clock.
func clockdiffCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "clockdiff host...",
		Short: "measure how far each host's clock is from this host's",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, hosts []string) error {
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			clock := clocksync.NewSystemClock() // read only: Now, never Adjust or Step
			conn, err := clocksync.ListenUDP("0.0.0.0:0")
			if err != nil {
				return err
			}
			defer conn.Close()
			if err := o.setupAuth(); err != nil {
				return err
			}
			conn.Signer = o.signer
			probe := clocksync.NewProbeClient(conn, clock, ownName(), clocksync.ProbeConfig{})
			served := make(chan struct{})
			go func() {
				defer close(served)
				_ = clocksync.Serve(ctx, conn, probe, nil, nil)
			}()
			defer func() { cancel(); <-served }()
			return o.forEachHost(hosts, func(h string) (string, map[string]any, error) {
				return clockdiff(ctx, o, clock, probe, h)
			})
		},
	}
}

func clockdiff(ctx context.Context, o *options, clock clocksync.Clock, probe *clocksync.ProbeClient, host string) (string, map[string]any, error) {
	ua, err := o.resolve(host)
	if err != nil {
		return "", nil, err
	}
	addr := ua.AddrPort()
	addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
	// Each method gets the whole wait (BSD clockdiff: measure(10000, …)):
	// a daemon that ignores the probe must not leave ICMP no time.
	wait := o.wait(10 * time.Second)
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	method := "probe"
	var m clocksync.Measurement
	if err = o.timedListens(pctx, ua, wait); errors.Is(err, errNoTimed) {
		// Nothing listens there: the probe would wait its whole time for
		// nothing; the kernel may still answer ICMP timestamps.
		err = fmt.Errorf("%w: no timed to probe", err)
	} else {
		m, err = probe.Measure(pctx, addr)
	}
	if err != nil {
		mctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		icmp, ierr := clocksync.NewICMPMeasurer(clock, clocksync.ICMPConfig{})
		if ierr != nil {
			return "", nil, fmt.Errorf("%s: no answer to the probe (%v), and ICMP is unavailable: %w", host, err, ierr)
		}
		defer icmp.Close()
		method = "icmp"
		if m, err = icmp.Measure(mctx, addr); err != nil {
			return "", nil, fmt.Errorf("%s is down or unreachable: %w", host, err)
		}
	}
	fields := map[string]any{"offset_seconds": m.Offset.Seconds(), "error_bound_seconds": m.ErrorBound.Seconds(),
		"rtt_seconds": m.RTT.Seconds(), "method": method, "samples": m.Samples}
	return describeOffset(host, m.Offset, m.ErrorBound, method), fields, nil
}

// describeOffset is BSD's sentence, with µs where the probe gives them.
func describeOffset(host string, off, bound time.Duration, method string) string {
	digits := 3 // probe: µs
	if method == "icmp" {
		digits = 0 // ICMP timestamps are whole milliseconds
	}
	ms := func(d time.Duration) string {
		return fmt.Sprintf("%.*f ms", digits, float64(d)/float64(time.Millisecond))
	}
	switch {
	case ms(off) == ms(0):
		return fmt.Sprintf("%s and this host have the same time (±%s, %s)", host, ms(bound), method)
	case off > 0:
		return fmt.Sprintf("%s is %s ahead (±%s, %s)", host, ms(off), ms(bound), method)
	default:
		return fmt.Sprintf("%s is %s behind (±%s, %s)", host, ms(-off), ms(bound), method)
	}
}

// timedListens asks host with MSITE on a connected socket, for at most
// half a second: a port-unreachable answer (errNoTimed) says at once that
// no timed listens there. Any other outcome, an answer or none (a daemon
// without a master does not answer MSITE), is not an error here.
func (o *options) timedListens(ctx context.Context, ua *net.UDPAddr, wait time.Duration) error {
	b, err := (&tsp.Packet{Type: tsp.MSite, Version: tsp.Version, Name: ownName()}).Marshal()
	if err != nil {
		return err
	}
	err = o.roundTrip(ctx, ua, b, min(wait, 500*time.Millisecond), func([]byte) bool { return true })
	if errors.Is(err, errNoTimed) {
		return err
	}
	return nil
}
