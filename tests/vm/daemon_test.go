//go:build vm

package vm

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/timed-project/timed/tests/internal/clockdiff"
	"github.com/timed-project/timed/timed/control"
)

// The daemons' timers: the fast profile's (`timed config --profile
// fast`), which the bounds below derive from.
const (
	syncInterval = 4 * time.Second
	electionMin  = 6 * time.Second
	electionMax  = 15 * time.Second

	// slack covers what the protocol does not: commands through an
	// emulated serial port and Go binaries starting under TCG (a status
	// poll of every guest takes 0.3–2 s), on a 2-core machine that other
	// work loads.
	slack = 10 * time.Second
)

// timedArgs is a guest's daemon: the production clock, the fast
// profile, the bridge's network only, the drift file and state in the 9p
// share, its log on the virtio port "log" (fd 4, init.sh). The guests
// that may be master trust each other only (-F, names from the
// initramfs's /etc/hosts); a slave-only guest has neither -M nor -F.
func timedArgs(g *guest, all []guestSpec) string {
	args := "timed --clock system --profile fast --networks " + subnet +
		" --drift-file /var/lib/timed/drift --state-dir /var/lib/timed"
	if g.spec.slaveOnly {
		return args
	}
	args += " -F"
	for i, sp := range all {
		if !sp.slaveOnly {
			args += " " + guestName(i)
		}
	}
	return args
}

// startTimed starts the daemon in the background (its pid in
// /run/timed.pid); it returns once the process runs, not once it
// answers.
func (g *guest) startTimed() error { return g.startTimedWith("") }

// startTimedWith is startTimed with extra options.
func (g *guest) startTimedWith(extra string) error {
	_, err := g.run(30*time.Second, timedArgs(g, specs)+extra+" >&4 2>&1 </dev/null & echo $! >/run/timed.pid")
	return err
}

// stopTimed sends SIGTERM and waits (5 s at most) for the daemon to exit
// (a zombie's cmdline is empty: init reaps it later).
func (g *guest) stopTimed() error {
	_, err := g.run(30*time.Second, stopScript)
	return err
}

const stopScript = `p=$(cat /run/timed.pid) && kill -TERM "$p" && i=0 &&
while grep -qs . "/proc/$p/cmdline"; do i=$((i+1)); [ "$i" -lt 100 ] || { echo "timed $p still runs"; exit 1; }; usleep 50000; done`

// stopTimedIfStarted is stopTimed where a daemon was started (a scenario
// run alone, go test -run, finds none).
func (g *guest) stopTimedIfStarted() error {
	_, err := g.run(30*time.Second, "[ ! -f /run/timed.pid ] || { "+stopScript+"; }")
	return err
}

// status is the guest daemon's `timedc --json status`.
func (g *guest) status() (*control.Status, error) {
	out, err := g.run(30*time.Second, "timedc --json --timeout 3s status")
	if err != nil {
		return nil, err
	}
	var answers []control.Status
	if err := json.Unmarshal([]byte(out), &answers); err != nil || len(answers) != 1 {
		return nil, fmt.Errorf("status of %s: want one answer: %v: %q", g.name, err, out)
	}
	return &answers[0], nil
}

// kernelClock is the guest kernel's clock state, as busybox adjtimex
// prints it (modes 0: it only reads).
type kernelClock struct {
	FreqPPM  float64       // freq.adjust / 65536
	Status   int           // STA_* bits
	MaxError time.Duration // maxerror, µs in the kernel
	EstError time.Duration
}

// STA_UNSYNC: the kernel's "clock not synchronised" (timex.h).
const staUnsync = 0x40

func (k kernelClock) unsync() bool { return k.Status&staUnsync != 0 }

func (k kernelClock) String() string {
	s := "sync"
	if k.unsync() {
		s = "UNSYNC"
	}
	return fmt.Sprintf("status %d (%s), maxerror %v, esterror %v, freq %+.3f ppm", k.Status, s, k.MaxError, k.EstError, k.FreqPPM)
}

var adjtimexLine = regexp.MustCompile(`(?m)^\s*(?:-\w\s+)?(freq\.adjust|maxerror|esterror|status):\s+(-?\d+)`)

func (g *guest) adjtimex() (kernelClock, error) {
	out, err := g.run(30*time.Second, "adjtimex")
	if err != nil {
		return kernelClock{}, err
	}
	return parseAdjtimex(out)
}

func parseAdjtimex(out string) (kernelClock, error) {
	var k kernelClock
	seen := 0
	for _, m := range adjtimexLine.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseInt(m[2], 10, 64)
		if err != nil {
			return k, err
		}
		seen++
		switch m[1] {
		case "freq.adjust":
			k.FreqPPM = float64(v) / 65536
		case "maxerror":
			k.MaxError = time.Duration(v) * time.Microsecond
		case "esterror":
			k.EstError = time.Duration(v) * time.Microsecond
		case "status":
			k.Status = int(v)
		}
	}
	if seen != 4 {
		return k, fmt.Errorf("adjtimex: want freq.adjust, maxerror, esterror and status in %q", out)
	}
	return k, nil
}

// ---- every guest at once ----

// each runs f for every guest at once and collects the answers by name.
func each[T any](gs []*guest, f func(*guest) (T, error)) (map[string]T, error) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]T{}
	var errs []error
	for _, g := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := f(g)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			out[g.name] = v
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// oneMaster returns the master when exactly one host is master and every
// other one is its slave, else "" and why not.
func oneMaster(st map[string]*control.Status) (string, string) {
	var masters []string
	for n, s := range st {
		if s.State == "master" {
			masters = append(masters, n)
		}
	}
	if len(masters) != 1 {
		return "", fmt.Sprintf("%d masters: %s", len(masters), describe(st))
	}
	m := masters[0]
	for n, s := range st {
		if n != m && (s.State != "slave" || s.Master == nil || s.Master.Name != m) {
			return "", fmt.Sprintf("%s is not a slave of %s: %s", n, m, describe(st))
		}
	}
	return m, ""
}

func describe(st map[string]*control.Status) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(st)) {
		s, m := st[n], "-"
		if s.Master != nil {
			m = s.Master.Name
		}
		parts = append(parts, fmt.Sprintf("%s=%s(master %s)", n, s.State, m))
	}
	return strings.Join(parts, " ")
}

// ---- the observer ----

// reading is one guest's clock against the host's, as the observer
// measured it: timedc clockdiff from the namespace's side of the bridge.
// It uses the project's probe where the guest's timed answers (ns
// stamps, the best of several exchanges; the error bound is half the
// best exchange's round trip plus the clocks' read resolution), and ICMP
// timestamps where nothing answers the probe (before the daemons start:
// ms resolution, bound half the round trip + 1 ms). The observer only
// reads the host's clock, which the namespace shares.
type reading = clockdiff.Answer

// observe measures every guest's clock (their addresses in one timedc
// run, one after another: a few ms each) and keys the readings by name.
func (n *network) observe(gs []*guest) (map[string]reading, error) {
	args := []string{"netns", "exec", n.ns, binDir + "/timedc", "--json", "--timeout", "3s", "clockdiff"}
	names := map[string]string{}
	for _, g := range gs {
		args = append(args, g.addr)
		names[g.addr] = g.name
	}
	out, cerr := command(60*time.Second, "ip", args...)
	var rs []reading
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		return nil, fmt.Errorf("observer: %w", errors.Join(cerr, err))
	}
	got := map[string]reading{}
	var errs []error
	for _, r := range rs {
		if r.Error != "" {
			errs = append(errs, fmt.Errorf("observer: %s: %s", names[r.Host], r.Error))
			continue
		}
		got[names[r.Host]] = r
	}
	if len(got) != len(gs) {
		errs = append(errs, fmt.Errorf("observer: %d readings of %d guests", len(got), len(gs)))
		return nil, errors.Join(errs...)
	}
	return got, nil
}

// spread is the largest pairwise difference of the readings' offsets,
// and the bound of its error: the two readings' bounds added.
func spread(rs map[string]reading) (time.Duration, time.Duration) {
	lo, hi := math.Inf(1), math.Inf(-1)
	var loB, hiB float64
	for _, r := range rs {
		if r.Offset < lo {
			lo, loB = r.Offset, r.Bound
		}
		if r.Offset > hi {
			hi, hiB = r.Offset, r.Bound
		}
	}
	return seconds(hi - lo), seconds(loB + hiB)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// describeReadings: "g1 +1.234 ms ±0.050 (probe)", by name.
func describeReadings(rs map[string]reading) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(rs)) {
		r := rs[n]
		parts = append(parts, fmt.Sprintf("%s %+.3f ms ±%.3f (%s)", n, r.Offset*1e3, r.Bound*1e3, r.Method))
	}
	return strings.Join(parts, ", ")
}

// maxBound is the largest error bound of the readings.
func maxBound(rs map[string]reading) time.Duration {
	var b float64
	for _, r := range rs {
		b = max(b, r.Bound)
	}
	return seconds(b)
}

// await polls cond every interval until it holds or bound passes, and
// returns how long it took. The guests change state on their own
// timers and nothing streams their events, so polling against a bound
// derived from those timers is the honest wait.
func await(bound, interval time.Duration, cond func() (bool, string)) (time.Duration, error) {
	start := time.Now()
	why := ""
	for {
		var ok bool
		if ok, why = cond(); ok {
			return time.Since(start), nil
		}
		if time.Since(start) > bound {
			return 0, fmt.Errorf("not within %v: %s", bound, why)
		}
		time.Sleep(interval)
	}
}

// median of xs (sorted copy).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s) == 0 {
		return math.NaN()
	}
	return s[len(s)/2]
}
