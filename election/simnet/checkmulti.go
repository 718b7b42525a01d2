package simnet

import (
	"fmt"

	"github.com/timed-project/timed/election"
)

// MultiChecker verifies, after every step of a Net with several networks,
// the invariants of a host on several networks:
//
//  1. No machine stays in a transient state longer than
//     Config.StateTimeout for the network's maximum delay (Checker's
//     second invariant, on every network).
//  2. A host follows a master on at most one network, and that network is
//     its slavenet.
//  3. Time flows only from the slavenet: a host's clock actions
//     (AdjustClock, SetClock) come from its slavenet's machine, and of the
//     networks it masters at most one votes (none when it has a
//     slavenet); the others dictate (SyncRound.Dictate).
//
// What must hold once the faults stop (one master per network, no cycle,
// one time source per site, no flapping) is SiteSettled and Snapshot's,
// which the tests check at quiescence.
type MultiChecker struct {
	net *Net
	cfg election.Config
	// Err is the first violation found (nil if none).
	Err error
}

// CheckMulti installs a MultiChecker on the network. cfg gives the timers
// (every node uses the same).
func CheckMulti(n *Net, cfg election.Config) *MultiChecker {
	c := &MultiChecker{net: n, cfg: cfg}
	prevStep, prevAction := n.OnStep, n.OnNetAction
	n.OnStep = func() {
		if prevStep != nil {
			prevStep()
		}
		c.check()
	}
	n.OnNetAction = func(nd *Node, net int, a election.Action) {
		if prevAction != nil {
			prevAction(nd, net, a)
		}
		c.action(nd, net, a)
	}
	return c
}

func (c *MultiChecker) err() error { return c.Err }

func (c *MultiChecker) fail(format string, args ...any) {
	if c.Err == nil {
		c.Err = fmt.Errorf("t=%v: %s", c.net.Elapsed(), fmt.Sprintf(format, args...))
	}
}

func (c *MultiChecker) action(nd *Node, net int, a election.Action) {
	if c.Err != nil {
		return
	}
	s, ok := nd.H.SlaveNet()
	switch a := a.(type) {
	case election.AdjustClock, election.SetClock:
		if !ok || s != net {
			c.fail("%s: clock action %v on %s, slavenet %d", nd.Name, a, c.net.label(nd, net), s)
		}
	case election.SyncRound:
		if a.Dictate != nd.H.Dictates(net) {
			c.fail("%s: round on %s with Dictate=%v, host says %v", nd.Name, c.net.label(nd, net), a.Dictate, !a.Dictate)
		}
	}
}

func (c *MultiChecker) check() {
	if c.Err != nil {
		return
	}
	n := c.net
	now := n.S.Now()
	lat := n.MaxDelay()
	for _, nd := range n.Nodes {
		if !nd.Up {
			continue
		}
		h := nd.H
		following, voting := 0, 0
		for i := range nd.Nets {
			if !h.Running(i) {
				continue
			}
			m := h.Machine(i)
			st := m.State()
			if lim := c.cfg.StateTimeout(st, lat); lim > 0 && now.Sub(m.StateSince()) > lim {
				c.fail("%s in %v for %v, limit %v", n.label(nd, i), st, now.Sub(m.StateSince()), lim)
				return
			}
			if _, ok := m.Master(); ok && (st == election.Slave || st == election.Accept) {
				following++
				if !h.IsSlaveNet(i) {
					c.fail("%s follows a master but is not the slavenet", n.label(nd, i))
					return
				}
			}
			if st.IsMaster() && !h.Dictates(i) {
				voting++
			}
		}
		_, slave := h.SlaveNet()
		switch {
		case following > 1:
			c.fail("%s follows masters on %d networks", nd.Name, following)
		case voting > 1 || (slave && voting > 0):
			c.fail("%s votes on %d networks (slavenet: %v)", nd.Name, voting, slave)
		}
	}
}
