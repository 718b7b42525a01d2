//go:build vm

package vm

import (
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/timed-project/timed/timed/control"
)

// Issue 22's scenario (docs/operating.md, "UTC on the LAN"): the namespace's side
// of the bridge runs chronyd as an NTP server of the host's clock (UTC
// here), one guest's chrony follows it and that guest's timed is a
// reference (--reference kernel), the others run plain timed.

// guestChronyConf is the reference guest's chrony: the host's chronyd on
// the bridge, polled every 0.5 s (so that the kernel's maxerror stays
// small: refMaxError), any offset stepped, the kernel told the
// clock is synchronised (on Linux chronyd clears STA_UNSYNC only with
// rtcsync), no command socket.
const guestChronyConf = "server " + observerAddr + ` iburst minpoll -1 maxpoll -1
makestep 1 -1
rtcsync
pidfile /run/chronyd.pid
cmdport 0
bindcmdaddress /
`

// refHold and refMaxError are the reference's reference-hold and
// reference-max-error in this scenario. A chrony whose only server falls
// silent keeps its last samples selectable (chrony's sources.c) and stops
// updating the kernel, whose maxerror then grows by 500 µs a second on
// its own (the kernel's NTP code): that growth is what tells the loss
// here. chrony polling every 0.5 s keeps maxerror at 0.1–4 ms on these
// guests (TCG's delays); 8 ms is crossed 8–16 s after the loss. The hold is short, so
// that the step-down and the return fit in the suite's time.
const (
	refHold     = 3 * time.Second
	refMaxError = 8 * time.Millisecond
)

// refBound bounds each change of the reference's claim: the kernel's
// maxerror growing to refMaxError (16 s at 500 µs/s) or chrony taking
// its server back (a few polls), the hold, the daemon's check (every
// half sync interval), an election beside it, and the slack.
const refBound = 20*time.Second + refHold + syncInterval + electionMax + slack

// utcWithin is how close to the host's clock every guest must be once
// the reference leads: loose, far above what the figures show, far below
// the seconds the guests booted off.
const utcWithin = 50 * time.Millisecond

// keptWithin: the clocks at the reference's step-down, a few rounds
// after they were all within a millisecond of it: loose, since a slave
// may meanwhile have had the first round of another master, whose
// corrections runs here showed off by 4–43 ms (righted the next round).
const keptWithin = 100 * time.Millisecond

// hostChrony is chronyd on the namespace's side of the bridge: it serves
// the host's clock and never adjusts it (-x); its files are in a
// directory of the test's.
type hostChrony struct {
	n      *network
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

func (n *network) startChrony(t *testing.T, dir string) *hostChrony {
	t.Helper()
	conf := filepath.Join(dir, "chrony.conf")
	body := fmt.Sprintf("allow %s\nlocal stratum 1\nbindaddress %s\npidfile %s\ncmdport 0\nbindcmdaddress /\n",
		subnet, observerAddr, filepath.Join(dir, "chronyd.pid"))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	log, err := os.OpenFile(filepath.Join(dir, "chronyd.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	// -x: never the host's clock; -d: in the foreground, logging to
	// stderr; -u root: no user to switch to in the test's directory.
	cmd := exec.Command("ip", "netns", "exec", n.ns, assets["chronyd"], "-x", "-d", "-u", "root", "-f", conf)
	cmd.Stdout, cmd.Stderr = log, log
	// It dies with the test, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("host chronyd: %v", err)
	}
	c := &hostChrony{n: n, dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(c.exited) }()
	t.Cleanup(c.stop)
	return c
}

// stop ends chronyd (SIGTERM, then SIGKILL after 5 s); done once it has
// exited.
func (c *hostChrony) stop() {
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.exited:
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
	}
}

func (c *hostChrony) log() string { return tail(filepath.Join(c.dir, "chronyd.log"), 20) }

// referenceUTC: the guest whose chrony follows the host's chronyd is the
// reference master and every other guest says it follows UTC through it;
// the host's chronyd stopped, the reference steps down and the others keep
// together; started again, the reference claims again.
func (s *suite) referenceUTC(t *testing.T) {
	var ref *guest
	for _, g := range s.gs {
		if !g.spec.slaveOnly {
			ref = g
			break
		}
	}
	if ref == nil {
		t.Fatal("no guest that may be master left")
	}
	start := time.Now()
	hc := s.n.startChrony(t, t.TempDir())
	// Every daemon restarted: the first corrections after a start are
	// stepped (makestep-threshold), so the slaves land on the reference
	// at once instead of slewing from the network time of before.
	if _, err := each(s.gs, func(g *guest) (struct{}, error) { return struct{}{}, g.stopTimedIfStarted() }); err != nil {
		t.Fatal(err)
	}
	ref.must("chronyd -d -u root -f /etc/chrony.conf >/tmp/chronyd.log 2>&1 </dev/null &")
	dump := func() string {
		out, _ := ref.run(10*time.Second, "tail -n 20 /tmp/chronyd.log")
		return "guest chronyd:\n" + out + "\nhost chronyd:\n" + hc.log()
	}
	var k kernelClock
	took, err := await(30*time.Second, 500*time.Millisecond, func() (bool, string) {
		var err error
		if k, err = ref.adjtimex(); err != nil {
			return false, err.Error()
		}
		// Settled: right after its first samples chrony's maxerror may
		// still be above the bound.
		return !k.unsync() && k.MaxError < refMaxError/2, k.String()
	})
	if err != nil {
		t.Fatalf("%s's chrony synchronised to the host's chronyd: %v\n%s", ref.name, err, dump())
	}
	report(t, ref.name+"'s chrony synchronised to the host's chronyd", "%.1f s after it started; kernel %v", took.Seconds(), k)

	released := time.Now()
	if s.release.IsZero() {
		s.release = released // the scenario alone (go test -run)
	}
	if _, err := each(s.gs, func(g *guest) (struct{}, error) {
		if g == ref {
			return struct{}{}, g.startTimedWith(fmt.Sprintf(" --reference kernel --reference-hold %s --reference-max-error %s", refHold, refMaxError))
		}
		return struct{}{}, g.startTimed()
	}); err != nil {
		t.Fatal(err)
	}
	st, err := awaitReference(s.gs, ref.name, true, electionBound)
	if err != nil {
		t.Fatalf("%s the reference master, every other guest synchronised to UTC via it: %v\n%s", ref.name, err, dump())
	}
	s.master = ref.name
	report(t, ref.name+" reference master, the others \"synchronised to UTC via "+ref.name+"\"", "%.1f s after the daemons started; %s", time.Since(released).Seconds(), describeUTC(st))
	rs, err := s.n.observe(s.gs)
	if err != nil {
		t.Fatal(err)
	}
	report(t, "offsets from the host's clock (UTC) as the reference took over", "%s", describeReadings(rs))

	// Steady state: rounds 1–2 of the reference's corrections.
	steadyFrom := time.Now()
	worst := map[string]float64{}
	time.Sleep(syncInterval) // the window opens a round later: a schedule, not a synchronisation
	for time.Since(steadyFrom) < 2*syncInterval {
		if rs, err = s.n.observe(s.gs); err != nil {
			t.Fatal(err)
		}
		for n, r := range rs {
			worst[n] = max(worst[n], math.Abs(r.Offset))
		}
		time.Sleep(time.Second) // the sampling period, not a synchronisation
	}
	var parts []string
	for _, g := range s.gs {
		parts = append(parts, fmt.Sprintf("%s %.3f ms", g.name, worst[g.name]*1e3))
		if worst[g.name] > utcWithin.Seconds() {
			t.Errorf("%s %.3f ms from the host's clock in steady state (bound %v)", g.name, worst[g.name]*1e3, utcWithin)
		}
	}
	report(t, "largest |offset| from the host's clock, steady state (observer)", "%s, over rounds 1–2 after the take-over", strings.Join(parts, ", "))

	// The server lost: the reference steps down after the hold, says so
	// (RESIGN), and no guest says it follows UTC any more; the clocks
	// keep together. One of the slaves takes over at once (a fraction of
	// a second in the simulator; before RESIGN they waited for their
	// election timers, 6–15 s): the return below does not wait for it,
	// so that the scenario stays short, and takes over whichever master
	// is up by then.
	hc.stop()
	lost := time.Now()
	st, err = awaitReference(s.gs, ref.name, false, refBound)
	if err != nil {
		t.Fatalf("host chronyd stopped: %s stops claiming, no guest follows UTC: %v\n%s", ref.name, err, dump())
	}
	r := st[ref.name].Reference
	report(t, "host chronyd stopped: "+ref.name+" no longer a reference", "%.1f s after (reference-max-error %v, reference-hold %v; %s's kernel maxerror %.3f ms, synchronised %v); %s",
		time.Since(lost).Seconds(), refMaxError, refHold, ref.name, r.KernelMaxErrorSecs*1e3, r.KernelSynchronised, describeUTC(st))
	if rs, err = s.n.observe(s.gs); err != nil {
		t.Fatal(err)
	}
	sp, bound := spread(rs)
	report(t, "offsets from the host's clock at the step-down", "%s; spread %.3f ms ±%.3f", describeReadings(rs), sp.Seconds()*1e3, bound.Seconds()*1e3)
	if sp > keptWithin {
		t.Errorf("the clocks %v apart at the step-down: the network came apart (bound %v)", sp, keptWithin)
	}

	// The server back: the reference claims again.
	hc = s.n.startChrony(t, t.TempDir())
	back := time.Now()
	st, err = awaitReference(s.gs, ref.name, true, refBound)
	if err != nil {
		t.Fatalf("host chronyd back: %s the reference master again: %v\n%s", ref.name, err, dump())
	}
	s.master = ref.name
	report(t, "host chronyd back: "+ref.name+" reference master again", "%.1f s after; %s", time.Since(back).Seconds(), describeUTC(st))
	if rs, err = s.n.observe(s.gs); err == nil {
		report(t, "offsets from the host's clock after the return", "%s", describeReadings(rs))
	}
	hc.stop()
	report(t, "the reference scenario took", "%.1f s", time.Since(start).Seconds())
}

// awaitReference waits, claiming, for ref to be the master claiming
// reference and every other guest its slave synchronised to UTC via it;
// or, !claiming, for ref to claim no longer and no guest to say it
// follows UTC. It returns the last statuses.
func awaitReference(gs []*guest, ref string, claiming bool, bound time.Duration) (map[string]*control.Status, error) {
	var st map[string]*control.Status
	_, err := await(bound, 500*time.Millisecond, func() (bool, string) {
		var err error
		if st, err = each(gs, (*guest).status); err != nil {
			return false, err.Error()
		}
		r := st[ref].Reference
		if r == nil {
			return false, ref + ": no reference in its status"
		}
		if r.Claiming != claiming {
			return false, fmt.Sprintf("%s: claiming %v (kernel synchronised %v, maxerror %.3f s)", ref, r.Claiming, r.KernelSynchronised, r.KernelMaxErrorSecs)
		}
		if claiming {
			if master, why := oneMaster(st); master != ref {
				return false, fmt.Sprintf("master %q, not %s: %s", master, ref, why)
			}
		}
		for n, s := range st {
			via := ""
			if s.Sync != nil {
				via = s.Sync.UTCVia
			}
			if claiming && via != ref {
				return false, fmt.Sprintf("%s: utc_via %q: %s", n, via, describeUTC(st))
			}
			if !claiming && via != "" {
				return false, fmt.Sprintf("%s: utc_via %q still: %s", n, via, describeUTC(st))
			}
		}
		return true, ""
	})
	return st, err
}

// describeUTC: each guest's state, sync state, utc_via and UTC bound.
func describeUTC(st map[string]*control.Status) string {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(st)) {
		s := st[g]
		p := g + " " + s.State
		if s.Sync != nil {
			p += " " + s.Sync.State
			if s.Sync.UTCVia != "" {
				p += " via " + s.Sync.UTCVia
			}
			if b := s.Sync.UTCBoundSecs; b != nil {
				p += fmt.Sprintf(" bound %.3f ms", *b*1e3)
			}
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}
