package simnet

import (
	"fmt"
	"slices"
	"strings"

	"github.com/timed-project/timed/election"
)

// Several networks. A Net with more than one network is a site: broadcast
// domains joined by gateways, nodes on several networks whose Host is
// slave on at most one of them and master (a submaster) or out of use on
// the others. The functions here say whether a site has settled: one
// master per network, every other node following it or (a gateway)
// ignoring the network, no cycle of gateways, and one time source for
// every part of the site that gateways join.

// follows is the master node nd follows on its slavenet, or nil.
func (n *Net) follows(nd *Node) *Node {
	s, ok := nd.H.SlaveNet()
	if !ok {
		return nil
	}
	mp, ok := nd.H.Master(s)
	if !ok {
		return nil
	}
	return n.Node(mp.Name)
}

// FollowCycle returns the nodes of a cycle in the "follows" graph (every
// up node to the master it follows on its slavenet), or nil when there is
// none: time that goes round and comes from nowhere.
func (n *Net) FollowCycle() []*Node {
	state := map[*Node]int{} // 1: on the current path, 2: done
	for _, start := range n.Nodes {
		if !start.Up || state[start] != 0 {
			continue
		}
		var path []*Node
		for nd := start; nd != nil && nd.Up; nd = n.follows(nd) {
			if state[nd] == 1 {
				i := slices.Index(path, nd)
				return path[i:]
			}
			if state[nd] == 2 {
				break
			}
			state[nd] = 1
			path = append(path, nd)
		}
		for _, nd := range path {
			state[nd] = 2
		}
	}
	return nil
}

// Sites groups the networks into sites: networks joined by an up node
// that may be master on both (a gateway that can carry time across).
// Each site is a sorted list of network indexes.
func (n *Net) Sites() [][]int {
	parent := make([]int, len(n.Networks))
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	for _, nd := range n.Nodes {
		if !nd.Up || !nd.M.Config().MayBeMaster {
			continue
		}
		for _, k := range nd.Nets[1:] {
			parent[find(k)] = find(nd.Nets[0])
		}
	}
	bySite := map[int][]int{}
	var roots []int
	for k := range n.Networks {
		r := find(k)
		if _, ok := bySite[r]; !ok {
			roots = append(roots, r)
		}
		bySite[r] = append(bySite[r], k)
	}
	out := make([][]int, 0, len(roots))
	for _, r := range roots {
		out = append(out, bySite[r])
	}
	return out
}

// Sources returns the time sources of a site: the up nodes that are
// master on one of its networks and follow nobody.
func (n *Net) Sources(site []int) []*Node {
	var out []*Node
	for _, nd := range n.Nodes {
		if !nd.Up {
			continue
		}
		if _, ok := nd.H.SlaveNet(); ok {
			continue
		}
		for i, k := range nd.Nets {
			if slices.Contains(site, k) && nd.H.State(i).IsMaster() && nd.H.Running(i) {
				out = append(out, nd)
				break
			}
		}
	}
	return out
}

// SiteSettled reports whether every network has settled and every site
// has one time source and no cycle; the string says what is wrong.
func (n *Net) SiteSettled() (bool, string) {
	for k := range n.Networks {
		if ok, why := n.networkSettled(k); !ok {
			return false, why
		}
	}
	if c := n.FollowCycle(); c != nil {
		return false, fmt.Sprintf("cycle %v", names(c))
	}
	for _, site := range n.Sites() {
		srcs := n.Sources(site)
		masters := false
		for _, k := range site {
			if len(n.netMasters(k)) > 0 {
				masters = true
			}
		}
		if masters && len(srcs) != 1 {
			return false, fmt.Sprintf("site %v has time sources %v", n.netNames(site), names(srcs))
		}
	}
	return true, ""
}

// netMasters returns the up nodes that are master on network k.
func (n *Net) netMasters(k int) []*Node {
	var out []*Node
	for _, nd := range n.Networks[k].Members {
		i := nd.local(k)
		if nd.Up && nd.H.Running(i) && nd.H.State(i).IsMaster() {
			out = append(out, nd)
		}
	}
	return out
}

// networkSettled: network k has exactly one master if any of its up nodes
// may be master (none otherwise), and every other up node follows it and
// is on its list, or is a gateway that has put the network out of use
// while it is slave or master elsewhere.
func (n *Net) networkSettled(k int) (bool, string) {
	w := n.Networks[k]
	eligible := false
	for _, nd := range w.Members {
		if nd.Up && nd.M.Config().MayBeMaster {
			eligible = true
		}
	}
	masters := n.netMasters(k)
	if !eligible {
		if len(masters) > 0 {
			return false, w.Name + ": a master among non-eligible nodes"
		}
		return true, ""
	}
	if len(masters) != 1 {
		return false, fmt.Sprintf("%s: %d masters %v", w.Name, len(masters), names(masters))
	}
	m := masters[0]
	mi := m.local(k)
	if st := m.H.State(mi); st != election.Master {
		return false, fmt.Sprintf("%s: %s is in %v", w.Name, m.Name, st)
	}
	for _, nd := range w.Members {
		if !nd.Up || nd == m {
			continue
		}
		i := nd.local(k)
		if nd.H.Ignored(i) {
			_, slave := nd.H.SlaveNet()
			mastersElsewhere := false
			for j := range nd.Nets {
				if j != i && nd.H.Running(j) && nd.H.State(j).IsMaster() {
					mastersElsewhere = true
				}
			}
			if !slave && !mastersElsewhere {
				return false, fmt.Sprintf("%s: %s ignores it and serves no other network", w.Name, nd.Name)
			}
			continue
		}
		st := nd.H.State(i)
		mp, ok := nd.H.Master(i)
		if st != election.Slave || !ok || mp.Name != m.Name {
			return false, fmt.Sprintf("%s: %s is %v following %q, not %s", w.Name, nd.Name, st, mp.Name, m.Name)
		}
		if !m.H.Machine(mi).IsSlave(nd.Name) {
			return false, fmt.Sprintf("%s: %s follows %s but is not on its list", w.Name, nd.Name, m.Name)
		}
	}
	for _, p := range m.H.Slaves(mi) {
		sl := n.Node(p.Name)
		if sl == nil || !sl.Up || sl.local(k) < 0 || !sl.H.Running(sl.local(k)) {
			return false, fmt.Sprintf("%s: %s lists %s, which does not follow it", w.Name, m.Name, p.Name)
		}
	}
	return true, ""
}

func (n *Net) netNames(ks []int) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = n.Networks[k].Name
	}
	return out
}

// Snapshot is the role of every node on every network, one line each: what
// must not change once a site has settled (no flapping). A node that knows
// no master and is not one is "polling": on a network where nobody may be
// master, hosts poll with MASTERREQ every election period (StartUp, then
// Slave), as BSD's do.
func (n *Net) Snapshot() string {
	var b strings.Builder
	for _, nd := range n.Nodes {
		if !nd.Up {
			fmt.Fprintf(&b, "%s down\n", nd.Name)
			continue
		}
		for i := range nd.Nets {
			st := n.netStatus(nd, i)
			if _, ok := nd.H.Master(i); !ok && nd.H.Running(i) {
				st = "polling"
			}
			fmt.Fprintf(&b, "%s %s\n", n.label(nd, i), st)
		}
	}
	return b.String()
}
