//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/deploy/compose"
	"github.com/timed-project/timed/tsp"
)

// Issue 13's scenarios: daemons that serve every network their host is
// on. What they read of the daemon:
//
//   - Status, per network (networkStates in networks_test.go is the one
//     place that reads it): each entry of "networks" carries "state"
//     ("master", "slave", "candidate", … and "ignore" for a network a
//     gateway leaves to a master it does not follow), "master" ({name,
//     address}: the master it follows there, or itself) and "slavenet"
//     (true on the one network a gateway is a slave on). The host-wide
//     "state", "master" and "clock_offset_seconds" stay.
//   - "loops_detected" (a top-level counter in the status): the LOOPs that
//     revealed a cycle or a second master, BSD's "loop detected" cases: a
//     LOOP with our own name back on our slave network, or a LOOP from
//     another master on a network we master (facts §3, "Loops and
//     submasters").
//   - A gateway with -M that finds a master on one network is its slave
//     there and master (submaster) on each network that has none, and its
//     slaves there follow the time its master gives it.
//   - `--bsd-compat`, a hidden flag for tests: the daemon looks like BSD's
//     timed on the wire. It drops every version-2 datagram unread (our
//     probe and ring election) and sends none, so it is measured by ICMP
//     and measures its slaves by ICMP; otherwise it is ours (the same
//     election and replies; the control socket, timedc status, works).

const (
	// followBound: the "within 1 ms of A's master". On an idle
	// bridge a probe's error is tens of µs per hop, and a network's time
	// crosses one gateway here.
	followBound = time.Millisecond

	// restoreBound: the issue's "one time source again within one sync
	// round" once the gateway is back. Its start-up poll finds its master
	// on one network and the other network's master (MASTERREQ and its
	// retransmits); it follows the first, ignores the other and asks both
	// which time source they serve (SOURCEREQ: election/doc.go, "Asking
	// for time sources"). Their answers, a round trip later, have it take
	// the other network over at once (a1's LOOP passed on, QUIT, and
	// MASTERUP to collect the slaves). Without the answers (BSD's masters)
	// their LOOPs would tell, a round to hear the first and a round more
	// to know the sources: two rounds. The round here is the bound the
	// issue sets; the margin is healBound's, for the poll that has to see
	// it.
	restoreBound = retransmit + candidateWait + syncInterval + time.Second // 2.72 s

	// restoreClockBound: the restored gateway's own clock is set by its
	// master's next round, and carried to the other network in the
	// gateway's next: a round more for the clocks than for the roles.
	restoreClockBound = restoreBound + syncInterval

	// cycleRounds: in a cycle of three networks the master's LOOP crosses
	// a gateway a round at worst, so a cycle shows within three rounds.
	cycleRounds = 3

	// stableRounds: no host may change its role on any network for this
	// many rounds once the site has settled (the issue's "no state
	// flapping for 10 sync rounds").
	stableRounds = 10
)

// siteSettled: one master on each network, and one top master.
func siteSettled(networks []string) func(site) (bool, string) {
	return func(s site) (bool, string) {
		for _, n := range networks {
			if m, why := s.oneMasterOn(n); m == "" {
				return false, why
			}
		}
		if tops := s.topMasters(); len(tops) != 1 {
			return false, fmt.Sprintf("%d top masters %v: %s", len(tops), tops, s.describe())
		}
		return true, ""
	}
}

// TestGatewayTwoNetworks: a master on neta (a1, the only -M host there)
// and a gateway g on neta and netb. g becomes a1's slave on neta and
// master on netb, and netb's hosts, started last, follow it: all within
// 1 ms of a1 at the end. g killed: netb elects its own master within the
// election bound, neta keeps a1. g restored: one time source again within
// one sync round (restoreBound), a1 still the top master.
func TestGatewayTwoNetworks(t *testing.T) {
	nets := []string{"neta", "netb"}
	c := newCluster(t, compose.Spec{
		Networks: []compose.Network{{Name: "neta"}, {Name: "netb"}},
		Hosts: []compose.Host{
			siteHost("a1", -1000, 0, true, "neta"),
			siteHost("a2", -400, 20, false, "neta"),
			siteHost("g", 300, -20, true, "neta", "netb"),
			siteHost("b1", 700, 40, true, "netb"),
			siteHost("b2", 1200, -40, true, "netb"),
		},
	})
	a, b := []string{"a1", "a2"}, []string{"b1", "b2"}

	c.start(a...)
	ms, took := c.awaitOneMasterOn(coldStartBound, []string{"neta"}, a...)
	if ms["neta"] != "a1" {
		t.Fatalf("master of neta is %s; a1 is the only host there with -M", ms["neta"])
	}
	report(t, "time to a1 master of neta", "%v (bound %v)", took.Round(time.Millisecond), coldStartBound)

	c.start("g")
	_, took = c.awaitSite("g: a1's slave on neta (its slavenet), master on netb", coldStartBound, func(s site) (bool, string) {
		g := s["g"].nets
		return g["neta"].State == "slave" && g["neta"].Master == "a1" && g["neta"].Slavenet && g["netb"].State == "master", s.describe()
	}, "a1", "a2", "g")
	report(t, "time for the gateway to be slave on neta, submaster on netb", "%v (bound %v)", took.Round(time.Millisecond), coldStartBound)

	c.start(b...)
	ms, took = c.awaitOneMasterOn(coldStartBound, nets)
	if ms["netb"] != "g" {
		t.Fatalf("master of netb is %s, want the gateway g, there first", ms["netb"])
	}
	report(t, "time for netb's hosts to follow g", "%v (bound %v)", took.Round(time.Millisecond), coldStartBound)
	top, worst, took := c.awaitOneTimeSource(followBound, convergeTime)
	if top != "a1" {
		t.Fatalf("the site's time source is %s, want a1", top)
	}
	report(t, "netb follows neta's time: time, largest offset from a1", "%v, %v (bound %v)", took.Round(time.Millisecond), worst, followBound)

	c.kill("g")
	killed := time.Now()
	rest := append(slices.Clone(a), b...)
	ms, _ = c.awaitOneMasterOn(electionBound, nets, rest...)
	if ms["neta"] != "a1" || ms["netb"] == "g" {
		t.Fatalf("after g was killed: masters %v, want a1 on neta and b1 or b2 on netb", ms)
	}
	report(t, "gateway killed: time to netb's own master", "%v (bound %v), %s", time.Since(killed).Round(time.Millisecond), electionBound, ms["netb"])
	// netb on its own for three rounds: its time parts from neta's.
	c.watch(3*syncInterval, ms["netb"], b...)
	s, err := c.siteView(rest...)
	if err != nil {
		t.Fatal(err)
	}
	report(t, "offset between the two masters after 3 rounds apart", "%v", time.Duration((s[ms["netb"]].st.OffsetSecs-s["a1"].st.OffsetSecs)*1e9))

	c.start("g")
	restored := time.Now()
	var roles time.Duration
	settled := siteSettled(nets)
	_, took = c.awaitSite(fmt.Sprintf("one time source again, clocks within %v of a1", followBound), restoreClockBound, func(s site) (bool, string) {
		ok, why := settled(s)
		if !ok {
			return false, why
		}
		if roles == 0 {
			roles = time.Since(restored)
		}
		if tops := s.topMasters(); tops[0] != "a1" {
			return false, fmt.Sprintf("top master %s, want a1: %s", tops[0], s.describe())
		}
		if w := s.offsetsFrom("a1"); w >= followBound {
			return false, fmt.Sprintf("a clock %v from a1's: %s", w, s.describe())
		}
		return true, ""
	})
	if roles > restoreBound {
		t.Errorf("one master per network and one top master %v after the gateway's restart, bound %v (one sync round)", roles, restoreBound)
	}
	report(t, "gateway restored: time to one time source (roles, clocks)", "%v, %v (bounds %v, %v)",
		roles.Round(time.Millisecond), took.Round(time.Millisecond), restoreBound, restoreClockBound)
	top, worst, _ = c.awaitOneTimeSource(followBound, convergeTime)
	report(t, "at the end: time source, largest offset from it", "%s, %v (bound %v)", top, worst, followBound)
	c.reportMessages(t)
}

// TestGatewayCycle: three networks in a cycle, neta–netb–netc–neta, each
// pair joined by a gateway (gab, gbc, gca, all -M), with a1 (-M) on neta
// and b1, c1 (without -M) on the others. Started together they settle on
// one master for the whole site. Then netc gets a second master: the
// gateway on netc that is not its master is cut off it (cutLink) until it
// is master of its side, and the cut is mended. Its LOOPs and the other
// master's meet: the loop is detected (loops_detected rises) and the site
// has one master again, and then no host changes its role on any network
// for stableRounds rounds.
func TestGatewayCycle(t *testing.T) {
	nets := []string{"neta", "netb", "netc"}
	c := newCluster(t, compose.Spec{
		Networks: []compose.Network{{Name: "neta"}, {Name: "netb"}, {Name: "netc"}},
		Hosts: []compose.Host{
			siteHost("a1", -1500, 0, true, "neta"),
			siteHost("b1", -900, 30, false, "netb"),
			siteHost("c1", -300, -30, false, "netc"),
			siteHost("gab", 300, 15, true, "neta", "netb"),
			siteHost("gbc", 900, -15, true, "netb", "netc"),
			siteHost("gca", 1500, 5, true, "netc", "neta"),
		},
	})
	start := c.start()
	settled := siteSettled(nets)
	siteBound := coldStartBound + cycleRounds*syncInterval
	s, _ := c.awaitSite("one master per network, one for the whole site", siteBound, settled)
	report(t, "time to one master for the site (from start)", "%v (bound %v), %s", time.Since(start).Round(time.Millisecond), siteBound, s.topMasters()[0])
	top, worst, took := c.awaitOneTimeSource(convergeBound, convergeTime)
	report(t, "clocks on the site's time: time, largest offset from "+top, "%v, %v (bound %v)", took.Round(time.Millisecond), worst, convergeBound)
	loopsBefore := loopsDetected(t, s)

	// A second master on netc: cut the gateway there that is not netc's
	// master off it, until it is master of its side.
	mc, _ := s.oneMasterOn("netc")
	x := "gbc"
	if mc == "gbc" {
		x = "gca"
	}
	c.cutLink(x, "netc")
	cut := time.Now()
	c.awaitSite(x+" master on netc, cut off it", electionBound, func(s site) (bool, string) {
		return s[x].nets["netc"].State == "master", s.describe()
	}, x)
	report(t, "second master on netc: "+x+" cut off, master there after", "%v (bound %v)", time.Since(cut).Round(time.Millisecond), electionBound)
	c.restoreLink(x, "netc")
	healed := time.Now()
	s, _ = c.awaitSite("one master for the site again", healBound+cycleRounds*syncInterval, settled)
	loops := loopsDetected(t, s) - loopsBefore
	if loops == 0 {
		t.Errorf("no LOOP detected after a second master on netc: loops_detected did not rise (%s)", s.describe())
	}
	report(t, "cut mended: time to one master for the site, loops detected", "%v (bound %v), %d; LOOP packets sent %d",
		time.Since(healed).Round(time.Millisecond), healBound+cycleRounds*syncInterval, loops, sentOf(s, tsp.Loop.String()))
	top, worst, _ = c.awaitOneTimeSource(convergeBound, convergeTime)

	// No flapping.
	flaps, polls := c.watchRoles(stableRounds*syncInterval, settled)
	if flaps != "" {
		t.Errorf("roles changed within %d rounds of settling: %s", stableRounds, flaps)
	}
	s, err := c.siteView()
	if err != nil {
		t.Fatal(err)
	}
	report(t, fmt.Sprintf("%d rounds settled: polls, largest offset from %s", stableRounds, top), "%d polls, no role changed; %v at the start, %v at the end (bound %v)",
		polls, worst, s.offsetsFrom(top), convergeBound)
	c.reportMessages(t)
}

// loopsDetected sums the hosts' loops_detected, which every host must
// report.
func loopsDetected(t *testing.T, s site) uint64 {
	t.Helper()
	var n uint64
	for h, v := range s {
		if v.st.LoopsDetected == nil {
			t.Fatalf("%s's status has no loops_detected", h)
		}
		n += *v.st.LoopsDetected
	}
	return n
}

// sentOf sums the packets of one type the polled hosts sent.
func sentOf(s site, typ string) uint64 {
	var n uint64
	for _, v := range s {
		n += v.st.Packets[typ].Tx
	}
	return n
}

// watchRoles polls the whole site for d: cond must hold at every poll, and
// no host may change its state or master on any network. It returns what
// changed ("" for nothing) and the number of polls. The duration is the
// observation window of the assertion, not a synchronisation.
func (c *cluster) watchRoles(d time.Duration, cond func(site) (bool, string)) (string, int) {
	c.t.Helper()
	type role struct{ state, master string }
	first := map[string]role{}
	var changes []string
	polls := 0
	for end := time.Now().Add(d); time.Now().Before(end); polls++ {
		s, err := c.siteView()
		if err != nil {
			c.t.Fatal(err)
		}
		if ok, why := cond(s); !ok {
			changes = append(changes, why)
		}
		for h, v := range s {
			for n, ns := range v.nets {
				k, r := h+" on "+n, role{ns.State, ns.Master}
				if was, seen := first[k]; !seen {
					first[k] = r
				} else if was != r {
					changes = append(changes, fmt.Sprintf("%s: %s of %q, then %s of %q", k, was.state, was.master, r.state, r.master))
					first[k] = r
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	sort.Strings(changes)
	return strings.Join(slices.Compact(changes), "; "), polls
}

// TestMixedVersions: BSD's daemons and ours on one network, BSD's
// simulated by --bsd-compat (v1, v2: our daemon without version 2, so it
// answers msite from its election as ours do, where BSD's slave would ask
// its master with MSITEREQ first). With our m1 master, msite through each
// slave names m1; m1 probes the BSD-like slaves once, remembers they do
// not answer and measures them by ICMP from then on. With m1 killed, v1
// (the only other -M host) is master, measuring its slaves by ICMP, and
// msite through our slave s1 names it. Every host runs its
// simulated clock at zero offset and drift: ICMP timestamps, which the
// BSD-like hosts are measured by, come from the container's kernel clock.
func TestMixedVersions(t *testing.T) {
	compat := []string{"--bsd-compat"}
	c := newCluster(t, compose.Spec{Hosts: []compose.Host{
		{Name: "m1", Master: true},
		{Name: "s1"},
		{Name: "v1", Master: true, Extra: compat},
		{Name: "v2", Extra: compat},
	}})
	c.start("m1")
	c.awaitOneMaster(coldStartBound, "m1")
	c.start("s1", "v1", "v2")
	if m, _ := c.awaitOneMaster(coldStartBound); m != "m1" {
		t.Fatalf("master %s, want m1 (there first)", m)
	}

	// msite from every host through every slave, both kinds.
	msiteAll := func(from, targets []string, want string) time.Duration {
		t.Helper()
		var slowest time.Duration
		for _, f := range from {
			t0 := time.Now()
			answers, err := c.msite(f, targets...)
			if err != nil {
				t.Fatal(err)
			}
			slowest = max(slowest, time.Since(t0))
			for _, a := range answers {
				if a.Master != want {
					t.Errorf("msite %s from %s: master %q, want %q (%s)", a.Host, f, a.Master, want, a.Error)
				}
			}
		}
		return slowest
	}
	d := msiteAll(c.names(), []string{"s1", "v1", "v2"}, "m1")
	report(t, "msite through our slave and BSD-like slaves, our master", "all name m1; slowest call %v", d.Round(time.Millisecond))

	// The probe is remembered as unanswered: over five rounds our master
	// probes its one probe-speaking slave (s1) and nobody else.
	probe := tsp.ExtProbe.String()
	before, err := c.statuses("m1")
	if err != nil {
		t.Fatal(err)
	}
	c.watch(5*syncInterval, "m1")
	after, err := c.statuses("m1")
	if err != nil {
		t.Fatal(err)
	}
	sent := after["m1"].Packets[probe].Tx - before["m1"].Packets[probe].Tx
	// A measurement sends 2 × 12 probes at most (clocksync.ProbeConfig's
	// defaults), one a round to s1; without the memory each BSD-like
	// slave would take as many again every round.
	if limit := uint64(5 * 2 * 12); sent > limit {
		t.Errorf("m1 sent %d probes in 5 rounds, more than its one probe-speaking slave takes (%d): the BSD-like slaves are still probed", sent, limit)
	}
	report(t, "probes our master sent in 5 rounds (1 probe-speaking slave, 2 BSD-like)", "%d (at most %d)", sent, 5*2*12)

	c.kill("m1")
	killed := time.Now()
	if m, _ := c.awaitOneMaster(electionBound, "s1", "v1", "v2"); m != "v1" {
		t.Fatalf("master %s after m1 was killed, want v1 (the only -M host left)", m)
	}
	report(t, "m1 killed: time to v1 (BSD-like) master", "%v (bound %v)", time.Since(killed).Round(time.Millisecond), electionBound)
	d = msiteAll([]string{"s1", "v1", "v2"}, []string{"s1", "v2"}, "v1")
	report(t, "msite through our slave and a BSD-like slave, BSD-like master", "all name v1; slowest call %v", d.Round(time.Millisecond))
	c.reportMessages(t, "s1", "v1", "v2") // m1 was killed
}
