//go:build e2e

package e2e

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/timed-project/timed/deploy/compose"
	"github.com/timed-project/timed/timed/control"
)

// Sites of several networks (issue 13): bridge networks of one compose
// project, hosts on one of them, gateways on two or more. Docker's bridges
// pass broadcasts among the containers of one network only (and its
// iptables isolation drops what one bridge would forward to another), so
// time crosses from one network to another only through a gateway's
// daemon. Docker assigns the subnets from its pools (a fixed one could
// collide with a parallel run's); the harness reads them back once the
// networks exist and names a daemon's networks by them.

// dockerNetwork is docker's name for the spec's network: compose prefixes
// the project.
func (c *cluster) dockerNetwork(network string) string { return c.project + "_" + network }

// readSubnets records the subnet docker gave each of the spec's networks.
func (c *cluster) readSubnets() {
	c.t.Helper()
	args := []string{"network", "inspect", "-f", "{{.Name}}{{range .IPAM.Config}} {{.Subnet}}{{end}}"}
	for _, n := range c.spec.AllNetworks() {
		args = append(args, c.dockerNetwork(n.Name))
	}
	out, err := command(30*time.Second, nil, "docker", args...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.subnets = map[string]netip.Prefix{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		for _, s := range f[1:] {
			if p, err := netip.ParsePrefix(s); err == nil && p.Addr().Is4() {
				c.subnets[strings.TrimPrefix(f[0], c.project+"_")] = p.Masked()
				break
			}
		}
	}
	for _, n := range c.spec.AllNetworks() {
		if !c.subnets[n.Name].IsValid() {
			c.t.Fatalf("network %s: no IPv4 subnet in docker network inspect: %q", n.Name, out)
		}
	}
}

// networkOf names the spec's network holding addr, an address or an
// address and port ("" for none).
func (c *cluster) networkOf(addr string) string {
	a, err := netip.ParseAddr(addr)
	if ap, perr := netip.ParseAddrPort(addr); perr == nil {
		a, err = ap.Addr(), nil
	}
	if err != nil {
		return ""
	}
	for name, p := range c.subnets {
		if p.Contains(a) {
			return name
		}
	}
	return ""
}

// hostNetworks are the networks the spec attaches service to.
func (c *cluster) hostNetworks(service string) []string {
	c.t.Helper()
	for _, h := range c.spec.Hosts {
		if h.Name == service {
			return c.spec.NetworksOf(h)
		}
	}
	c.t.Fatalf("no host %s in the spec", service)
	return nil
}

// onNetwork are the timed hosts the spec attaches to network.
func (c *cluster) onNetwork(network string) []string {
	var out []string
	for _, h := range c.spec.Hosts {
		if !h.Witness && slices.Contains(c.spec.NetworksOf(h), network) {
			out = append(out, h.Name)
		}
	}
	return out
}

// ipOn is the service's address on network ("" while detached from it).
func (c *cluster) ipOn(service, network string) string {
	c.t.Helper()
	ip, err := c.inspect(service, fmt.Sprintf(`{{with index .NetworkSettings.Networks %q}}{{.IPAddress}}{{end}}`, c.dockerNetwork(network)))
	if err != nil {
		c.t.Fatal(err)
	}
	return ip
}

// attached are the spec's networks docker has the service on now.
func (c *cluster) attached(service string) []string {
	c.t.Helper()
	out, err := c.inspect(service, `{{range $k, $v := .NetworkSettings.Networks}}{{$k}} {{end}}`)
	if err != nil {
		c.t.Fatal(err)
	}
	var nets []string
	for _, n := range strings.Fields(out) {
		nets = append(nets, strings.TrimPrefix(n, c.project+"_"))
	}
	sort.Strings(nets)
	return nets
}

// bridgeOf is the host side of network: its Linux bridge, br- and the
// start of the network's id.
func (c *cluster) bridgeOf(network string) string {
	c.t.Helper()
	out, err := command(30*time.Second, nil, "docker", "network", "inspect", "-f", "{{.Id}}", c.dockerNetwork(network))
	id := strings.TrimSpace(out)
	if err != nil || len(id) < 12 {
		c.t.Fatalf("network %s of %s: %q %v", network, c.project, id, err)
	}
	return "br-" + id[:12]
}

// disconnect takes the service's container off network (docker network
// disconnect): its interface there is gone, the container and its daemon
// keep running.
func (c *cluster) disconnect(service, network string) {
	c.t.Helper()
	c.network("disconnect", service, network)
}

// connect puts the service's container back on network, under its
// service name as compose had it (another address may come with it).
func (c *cluster) connect(service, network string) {
	c.t.Helper()
	c.network("connect", service, network, "--alias", service)
}

func (c *cluster) network(op, service, network string, flags ...string) {
	c.t.Helper()
	id, err := c.id(service)
	if err == nil {
		args := append(append([]string{"network", op}, flags...), c.dockerNetwork(network), id)
		_, err = command(time.Minute, nil, "docker", args...)
	}
	if err != nil {
		c.t.Fatal(err)
	}
}

// ifaceOn is the name of the service's interface on network, found by its
// address there.
func (c *cluster) ifaceOn(service, network string) string {
	c.t.Helper()
	ip := c.ipOn(service, network)
	out, err := c.netnsOutput(service, "ip", "-o", "-4", "addr", "show")
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		// "23: eth1    inet 172.19.0.3/16 brd 172.19.255.255 scope global eth1 …"
		f := strings.Fields(line)
		if ip != "" && len(f) > 3 && f[2] == "inet" && strings.HasPrefix(f[3], ip+"/") {
			name, _, _ := strings.Cut(f[1], "@")
			return name
		}
	}
	c.t.Fatalf("%s: no interface with %s's address on %s (%q) in\n%s", service, service, network, ip, out)
	return ""
}

// cutLink cuts the service off network and restore mends it: a cable
// pulled, not docker network disconnect, so the interface and its address
// stay and the daemon sees only silence. The host drops whatever arrives
// on its interface there (broadcasts included), and every other timed
// host of that network drops whatever comes from its address there, each
// in its own network namespace (iptables INPUT, as partition does).
func (c *cluster) cutLink(service, network string) {
	c.t.Helper()
	c.linkRules("-I", service, network)
}

func (c *cluster) restoreLink(service, network string) {
	c.t.Helper()
	c.linkRules("-D", service, network)
}

func (c *cluster) linkRules(op, service, network string) {
	c.t.Helper()
	ip, iface := c.ipOn(service, network), c.ifaceOn(service, network)
	rules := map[string][]string{service: {op, "INPUT", "-i", iface, "-j", "DROP"}}
	for _, h := range c.onNetwork(network) {
		if h != service {
			rules[h] = []string{op, "INPUT", "-s", ip, "-j", "DROP"}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(rules))
	for h, rule := range rules {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- c.netns(h, append([]string{"iptables"}, rule...)...)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			c.t.Fatal(err)
		}
	}
}

// cutDrops is how many packets the service's own rule of cutLink dropped
// on network, and whether the rule is there.
func (c *cluster) cutDrops(service, network string) (uint64, bool) {
	c.t.Helper()
	iface := c.ifaceOn(service, network)
	out, err := c.netnsOutput(service, "iptables", "-L", "INPUT", "-v", "-x", "-n")
	if err != nil {
		c.t.Fatal(err)
	}
	for _, line := range strings.Split(out, "\n") {
		// pkts bytes target prot opt in out source destination
		f := strings.Fields(line)
		var pkts uint64
		if len(f) > 5 && f[2] == "DROP" && f[5] == iface {
			if _, err := fmt.Sscan(f[0], &pkts); err == nil {
				return pkts, true
			}
		}
	}
	return 0, false
}

// ---- status per network ----

// multiStatus is control.Status with loops_detected as a pointer, so that
// a status without it (a daemon from before issue 13) is told from 0.
// Each entry of "networks" says the daemon's state, master and slaves on
// that network and whether it is the slavenet (the one network a gateway
// is a slave on).
type multiStatus struct {
	control.Status
	LoopsDetected *uint64 `json:"loops_detected,omitempty"` // shadows control.Status.LoopsDetected
}

// netState is a daemon's role on one network.
type netState struct {
	Address string // the host's address there, as the daemon has it
	// Served: the daemon has a role there (a state); every network it
	// lists has one.
	Served   bool
	State    string // "master", "slave", "candidate", …; BSD's "ignore" for a network a gateway leaves to another master
	Master   string // the master it follows there
	Slavenet bool   // the network a gateway is a slave on
}

// hostView is one host's status and its roles by network (the spec's
// names).
type hostView struct {
	st   *multiStatus
	nets map[string]netState
}

func (c *cluster) view(service string) (hostView, error) {
	var st multiStatus
	if err := c.statusInto(service, &st); err != nil {
		return hostView{}, err
	}
	nets, err := c.networkStates(service, &st)
	return hostView{&st, nets}, err
}

// networkStates is what the service's daemon says of each network it
// lists, by the spec's names: the state, master and slavenet of each
// entry of "networks" (the daemon runs one election per network, issue
// 13). This is the one place that reads them.
func (c *cluster) networkStates(service string, st *multiStatus) (map[string]netState, error) {
	out := map[string]netState{}
	for _, n := range st.Networks {
		name := c.networkOf(n.Address)
		if name == "" {
			return nil, fmt.Errorf("%s lists network %s %s, on none of the site's subnets %v", service, n.Interface, n.Address, c.subnets)
		}
		ns := netState{Address: n.Address, Served: n.State != "", State: n.State, Slavenet: n.Slavenet}
		if n.Master != nil {
			ns.Master = n.Master.Name
		}
		out[name] = ns
	}
	return out, nil
}

// site is every polled host's view at one poll.
type site map[string]hostView

// siteView polls the named hosts (default: every timed host) at once.
func (c *cluster) siteView(names ...string) (site, error) {
	v, err := askAll(c, names, c.view)
	return site(v), err
}

// served are the hosts that serve network, sorted.
func (s site) served(network string) []string {
	var out []string
	for n, h := range s {
		if h.nets[network].Served {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// inUse are the hosts that serve network and do not ignore it: those whose
// clocks the network's master keeps, and itself.
func (s site) inUse(network string) []string {
	return slices.DeleteFunc(s.served(network), func(n string) bool { return s[n].nets[network].State == "ignore" })
}

// oneMasterOn checks that exactly one of the hosts serving network is
// master there and every other one there is its slave (or, a gateway,
// leaves that network to it: "ignore"); it returns the master.
func (s site) oneMasterOn(network string) (string, string) {
	var ms []string
	for _, n := range s.served(network) {
		if s[n].nets[network].State == "master" {
			ms = append(ms, n)
		}
	}
	if len(ms) != 1 {
		return "", fmt.Sprintf("%d masters on %s %v: %s", len(ms), network, ms, s.describe())
	}
	for _, n := range s.served(network) {
		ns := s[n].nets[network]
		if n != ms[0] && ns.State != "ignore" && (ns.State != "slave" || ns.Master != ms[0]) {
			return "", fmt.Sprintf("%s is not a slave of %s on %s: %s", n, ms[0], network, s.describe())
		}
	}
	return ms[0], ""
}

// topMasters are the hosts that are master somewhere and slave nowhere:
// the time sources of the site.
func (s site) topMasters() []string {
	var out []string
	for n, h := range s {
		master, slave := false, false
		for _, ns := range h.nets {
			master = master || ns.State == "master"
			slave = slave || ns.State == "slave"
		}
		if master && !slave {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// oneTimeSource checks that the polled hosts have one time source: exactly
// one top master, and every host's clock within bound of its. It returns
// the top master and the largest offset from it.
func (s site) oneTimeSource(bound time.Duration) (string, time.Duration, string) {
	tops := s.topMasters()
	if len(tops) != 1 {
		return "", 0, fmt.Sprintf("%d top masters %v: %s", len(tops), tops, s.describe())
	}
	top := tops[0]
	worst := s.offsetsFrom(top)
	if worst >= bound {
		return top, worst, fmt.Sprintf("a clock %v from %s's: %s", worst, top, s.describe())
	}
	return top, worst, ""
}

// offsetsFrom is the largest offset of a polled host's clock from ref's.
func (s site) offsetsFrom(ref string) time.Duration {
	var worst time.Duration
	for _, h := range s {
		worst = max(worst, time.Duration((h.st.OffsetSecs-s[ref].st.OffsetSecs)*1e9).Abs())
	}
	return worst
}

func (s site) describe() string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(s)) {
		h := s[n]
		nets := make([]string, 0, len(h.nets))
		for net, ns := range h.nets {
			switch {
			case !ns.Served:
				nets = append(nets, net+":unserved")
			case ns.Master != "" && ns.State != "master":
				nets = append(nets, fmt.Sprintf("%s:%s of %s", net, ns.State, ns.Master))
			default:
				nets = append(nets, net+":"+ns.State)
			}
		}
		sort.Strings(nets)
		parts = append(parts, fmt.Sprintf("%s=[%s](offset %+.6fs)", n, strings.Join(nets, " "), h.st.OffsetSecs))
	}
	return strings.Join(parts, " ")
}

// awaitSite polls the named hosts (default: all) until cond holds of the
// site, within bound; it returns the last view and the time taken.
func (c *cluster) awaitSite(what string, bound time.Duration, cond func(site) (bool, string), names ...string) (site, time.Duration) {
	c.t.Helper()
	var last site
	took := c.await(what, bound, func() (bool, string) {
		s, err := c.siteView(names...)
		if err != nil {
			return false, err.Error()
		}
		last = s
		return cond(s)
	})
	return last, took
}

// awaitOneMasterOn waits until each of networks has one master that every
// other polled host (default: all) serving it follows; it returns the
// masters by network and the time taken.
func (c *cluster) awaitOneMasterOn(bound time.Duration, networks []string, names ...string) (map[string]string, time.Duration) {
	c.t.Helper()
	ms := map[string]string{}
	_, took := c.awaitSite(fmt.Sprintf("one master on each of %v", networks), bound, func(s site) (bool, string) {
		for _, n := range networks {
			m, why := s.oneMasterOn(n)
			if m == "" {
				return false, why
			}
			ms[n] = m
		}
		return true, ""
	}, names...)
	return ms, took
}

// awaitOneTimeSource waits until the named hosts (default: all) have one
// time source, every clock within bound of the top master's; it returns
// the top master, the largest offset from it and the time taken.
func (c *cluster) awaitOneTimeSource(bound, within time.Duration, names ...string) (string, time.Duration, time.Duration) {
	c.t.Helper()
	var top string
	var worst time.Duration
	_, took := c.awaitSite(fmt.Sprintf("one time source, clocks within %v of it", bound), within, func(s site) (bool, string) {
		var why string
		top, worst, why = s.oneTimeSource(bound)
		return why == "", why
	}, names...)
	return top, worst, took
}

// siteHost is a daemon of a site: on the named networks, at offset (ms)
// and drift (ppm) of its own, with -M or without.
func siteHost(name string, offsetMS, driftPPM int, master bool, networks ...string) compose.Host {
	return compose.Host{Name: name, Offset: time.Duration(offsetMS) * time.Millisecond, DriftPPM: driftPPM, Master: master, Networks: networks}
}
