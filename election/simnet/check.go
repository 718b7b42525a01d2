package simnet

import (
	"fmt"
	"time"

	"github.com/timed-project/timed/election"
)

// Checker verifies the invariants of issue 3 after every step of a Net:
//
//  1. Convergence: once the network has been connected and fault-free (no
//     lossy link, no crash, restart or partition change) for Bound, every
//     connected component has exactly one master and every live node
//     follows it and is on its list (a component without master-eligible
//     nodes must have no master: its nodes poll).
//  2. No node stays in Candidate, Accept, Conflict, Consistency (or
//     NoMaster) longer than Config.StateTimeout for the network's maximum
//     delay.
//  3. Two masters never coexist in one component for longer than one sync
//     interval (plus the few packet delays the QUIT needs, see Merge)
//     after the component became connected and fault-free.
//
// Every node must use the same timers (names, eligibility and trust may
// differ).
type Checker struct {
	net *Net
	cfg election.Config
	// Bound is B of invariant 1 (Config.ConvergenceBound).
	Bound time.Duration
	// Merge is the limit of invariant 3.
	Merge time.Duration
	// Err is the first violation found (nil if none).
	Err error

	multi map[int]time.Time // component group → since when it has ≥ 2 masters
}

// FailedElections is how many failed elections (collisions) the bound B
// of the checker allows; see election.Config.ConvergenceBound.
const FailedElections = 3

// Check installs a Checker on the network. cfg gives the timers.
func Check(n *Net, cfg election.Config) *Checker {
	c := &Checker{net: n, cfg: cfg, multi: map[int]time.Time{}}
	c.recompute()
	prev := n.OnStep
	n.OnStep = func() {
		if prev != nil {
			prev()
		}
		c.check()
	}
	return c
}

func (c *Checker) recompute() {
	lat := c.net.MaxDelay()
	c.Bound = c.cfg.ConvergenceBound(lat, FailedElections)
	c.Merge = c.cfg.SyncInterval + 6*lat + 2*c.cfg.AnswerDelay
}

func (c *Checker) err() error { return c.Err }

func (c *Checker) fail(format string, args ...any) {
	if c.Err == nil {
		c.Err = fmt.Errorf("t=%v: %s", c.net.Elapsed(), fmt.Sprintf(format, args...))
	}
}

func (c *Checker) check() {
	if c.Err != nil {
		return
	}
	n := c.net
	now := n.S.Now()
	lat := n.MaxDelay()
	c.recompute()
	// Invariant 2.
	for _, nd := range n.Nodes {
		if !nd.Up {
			continue
		}
		st := nd.M.State()
		if lim := c.cfg.StateTimeout(st, lat); lim > 0 && now.Sub(nd.M.StateSince()) > lim {
			c.fail("%s in %v for %v, limit %v", nd.Name, st, now.Sub(nd.M.StateSince()), lim)
			return
		}
	}
	faultFree := !n.Lossy()
	since := now.Sub(n.FaultFreeSince())
	// Invariant 3 (and bookkeeping for it).
	for _, comp := range n.Components() {
		g := n.Group(comp[0].ID)
		masters := 0
		for _, nd := range comp {
			if nd.M.State().IsMaster() {
				masters++
			}
		}
		if masters < 2 {
			delete(c.multi, g)
			continue
		}
		t, ok := c.multi[g]
		if !ok {
			c.multi[g] = now
			t = now
		}
		if !faultFree {
			continue
		}
		if t.Before(n.FaultFreeSince()) {
			t = n.FaultFreeSince()
		}
		if now.Sub(t) > c.Merge {
			c.fail("%d masters in component %v for %v (limit %v)", masters, names(comp), now.Sub(t), c.Merge)
			return
		}
	}
	// Invariant 1.
	if faultFree && since >= c.Bound {
		for _, comp := range n.Components() {
			if ok, why := componentSettled(comp); !ok {
				c.fail("not settled %v after %v fault-free (B=%v): %s", names(comp), since, c.Bound, why)
				return
			}
		}
	}
}
