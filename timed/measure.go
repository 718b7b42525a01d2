package timed

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"github.com/timed-project/timed/clocksync"
)

// fallbackMeasurer measures a host with our probe (version 2, nanosecond
// stamps) or with ICMP timestamps (RFC 792, milliseconds), and remembers
// per host which one it answers:
//   - a host that answered the probe is ours: it is never measured by
//     ICMP, which the kernel answers, and which for one of our daemons on
//     a simulated clock (or after a probe merely got lost) is not the
//     clock being synchronised;
//   - a host that ignored the probe but answered ICMP is a BSD daemon (it
//     drops version 2 unread): it is measured by ICMP from then on, with
//     the probe tried again at the next measurement (a daemon of ours on
//     a loaded host may have answered too late) and then every
//     reprobeEvery measurements in case it was upgraded, instead of a
//     dozen wasted probes each round.
//
// A host not known to answer the probe is given probeDiscovery to answer
// one, so that a BSD host leaves the round time for ICMP.
type fallbackMeasurer struct {
	probe, icmp clocksync.Measurer

	mu    sync.Mutex
	hosts map[netip.AddrPort]*hostProtocol
}

type hostProtocol struct {
	ours      bool   // answered the probe
	bsd       bool   // ignored the probe, answered ICMP
	sinceProb int    // ICMP measurements since the probe was last tried
	last      string // method of the last measurement that succeeded: "probe" or "icmp"
}

const (
	// reprobeEvery: a BSD host gets the probe again this often.
	reprobeEvery = 16
	// maxHostProtocols bounds the table; past it, it starts afresh (hosts
	// are then probed once more), which only costs a few probes.
	maxHostProtocols = 4096
)

func newFallbackMeasurer(probe, icmp clocksync.Measurer) *fallbackMeasurer {
	return &fallbackMeasurer{probe: probe, icmp: icmp, hosts: map[netip.AddrPort]*hostProtocol{}}
}

// entry is host's record (made if new); call with f.mu held.
func (f *fallbackMeasurer) entry(host netip.AddrPort) *hostProtocol {
	h := f.hosts[host]
	if h == nil {
		if len(f.hosts) >= maxHostProtocols {
			clear(f.hosts)
		}
		h = &hostProtocol{}
		f.hosts[host] = h
	}
	return h
}

// useICMP says whether host is measured by ICMP this time: a known BSD
// host, but for every reprobeEvery-th time.
func (f *fallbackMeasurer) useICMP(host netip.AddrPort) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.entry(host)
	if !h.bsd {
		return false
	}
	h.sinceProb++
	if h.sinceProb >= reprobeEvery {
		h.sinceProb = 0
		return false
	}
	return true
}

func (f *fallbackMeasurer) record(host netip.AddrPort, ours, bsd bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.entry(host)
	if bsd && h.ours {
		// Its probe reply came while ICMP measured it (sawProbeReply):
		// ours after all, this once measured by ICMP.
		h.last = "icmp"
		return
	}
	if bsd && !h.bsd {
		// Taken for BSD the first time: probe it once more at the next
		// measurement before giving it reprobeEvery of ICMP. A daemon of
		// ours on a loaded host may answer after the discovery wait
		// (sawProbeReply then catches it).
		h.sinceProb = reprobeEvery - 1
	}
	h.ours, h.bsd = ours, bsd
	h.last = "probe"
	if bsd {
		h.last = "icmp"
	}
}

// sawProbeReply records that host answered our probe, if only too late
// for the measurement that asked (a reply after the discovery wait, on a
// loaded host): it is one of ours, measured by the probe from now on.
// Without it such a daemon was taken for a BSD one and measured by ICMP
// for reprobeEvery rounds, by the kernel's answers: milliseconds, and, on
// a simulated clock, not the clock synchronised at all (issue 20: at
// N = 150 under load, slaves 150 ms off that the master saw in step).
func (f *fallbackMeasurer) sawProbeReply(host netip.AddrPort) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := f.entry(host)
	h.ours, h.bsd, h.sinceProb = true, false, 0
}

// method is how host was last measured: "probe", "icmp", or "" if it has
// not been yet.
func (f *fallbackMeasurer) method(host netip.AddrPort) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.hosts[host]; h != nil {
		return h.last
	}
	return ""
}

func (f *fallbackMeasurer) Measure(ctx context.Context, host netip.AddrPort) (clocksync.Measurement, error) {
	if host.Addr().Is6() {
		// ICMPv6 has no timestamp messages: an IPv6 host is measured by
		// the probe or not at all. BSD's daemons are IPv4 only anyway.
		m, err := f.probe.Measure(ctx, host)
		if err != nil {
			return m, fmt.Errorf("probe: %w (no ICMP timestamps over IPv6: only timed daemons that answer the probe are measured there)", err)
		}
		f.record(host, true, false)
		return m, nil
	}
	if f.useICMP(host) {
		m, err := f.icmp.Measure(ctx, host)
		if err == nil {
			f.record(host, false, true)
		}
		return m, err
	}
	f.mu.Lock()
	ours := f.entry(host).ours
	f.mu.Unlock()
	if ours {
		m, err := f.probe.Measure(ctx, host) // never ICMP (above)
		if err == nil {
			f.record(host, true, false)
		}
		return m, err
	}
	// Not known to answer the probe: a short try first. A host that
	// ignores it would otherwise take the whole round's time (a dozen
	// unanswered probes), and leave none for ICMP.
	try, cancel := context.WithTimeout(ctx, discoverWait(ctx))
	m, err := f.probe.Measure(try, host)
	cut := try.Err() != nil
	cancel()
	if err == nil {
		f.record(host, true, false)
		if cut && ctx.Err() == nil {
			return f.probe.Measure(ctx, host) // it answers: measure it fully
		}
		return m, nil
	}
	if ctx.Err() != nil {
		return m, err
	}
	m, ierr := f.icmp.Measure(ctx, host)
	if ierr != nil {
		return m, fmt.Errorf("probe: %w; icmp: %w", err, ierr)
	}
	f.record(host, false, true)
	return m, nil
}

// probeDiscovery is how long a host not known to answer the probe is
// given to answer it (three of the probe's 100 ms waits); at most half the
// time left to the measurement, the rest being ICMP's.
const probeDiscovery = 300 * time.Millisecond

func discoverWait(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return min(probeDiscovery, time.Until(dl)/2)
	}
	return probeDiscovery
}

// noMeasurer measures nothing: a --bsd-compat daemon without ICMP
// timestamps (it may not send our probe).
type noMeasurer struct{ err error }

func (n noMeasurer) Measure(context.Context, netip.AddrPort) (clocksync.Measurement, error) {
	return clocksync.Measurement{}, fmt.Errorf("no ICMP timestamps: %w", n.err)
}
