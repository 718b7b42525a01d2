// Package compose writes the docker-compose files of the multi-host test
// network: N containers on one bridge network, or on several with
// gateways attached to more than one (issue 13's sites), each running
// timed on a simulated clock of its own (containers share the host's
// kernel clock, so no daemon there may ever adjust it: the containers get
// NET_BIND_SERVICE and NET_RAW only, never SYS_TIME).
// deploy/docker-compose.yml is Generate(Default(5)); cmd deploy/gen-compose
// writes it and larger ones, and the end-to-end tests (tests/e2e) generate
// their scenarios with it.
package compose

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Timers shared by every daemon of the network: the fast profile, with a
// 1 s sync round and a 2–4 s election timer so that a scenario takes
// seconds. The e2e tests derive their bounds from these values.
const (
	SyncInterval       = time.Second
	ElectionTimeoutMin = 2 * time.Second
	ElectionTimeoutMax = 4 * time.Second
)

// Host is one container.
type Host struct {
	Name     string        // service, container host name and TSP name
	Offset   time.Duration // initial offset of the simulated clock from the kernel's
	DriftPPM int           // drift of the simulated clock
	Master   bool          // -M
	Trusted  []string      // -F list (implies -M); empty trusts every master
	// Witness runs no timed, only an idle timedc prompt: a container whose
	// kernel answers ICMP timestamps and nothing answers the probe.
	Witness bool
	// Entrypoint, for a witness, replaces the idle timedc prompt with
	// another program that is not timed (the e2e suite's attacker).
	Entrypoint []string
	Extra      []string // more daemon flags
	// Mounts are bind mounts, "source:target[:ro]" (a key file);
	// Tmpfs are tmpfs mounts, "target[:options]" (a state directory,
	// "/state:mode=0700"), gone with the container.
	Mounts []string
	Tmpfs  []string
	// Networks names the networks of the Spec the container is attached
	// to, in order; empty: the Spec's first network. A host on two or more
	// is a gateway.
	Networks []string
}

// DefaultNetwork is the name of the one network of a Spec that lists
// none (deploy/docker-compose.yml's); docker calls it <project>_tsp.
const DefaultNetwork = "tsp"

// Network is one bridge network of a Spec. Docker's bridge networks pass
// broadcasts between the containers on them, and only between those: a
// broadcast reaches another network only through a daemon that forwards
// it, a gateway.
type Network struct {
	// Name is the network's key in the compose file and in Host.Networks
	// (docker's name for it is <project>_<Name>): a letter, then letters,
	// digits, '.', '_' or '-'.
	Name string
	// Subnet fixes the network's IPv4 subnet ("10.213.1.0/24") so that
	// its addresses are known before it starts; empty: docker assigns one
	// from its address pools. Docker refuses a fixed subnet that overlaps
	// any network the engine has ("Pool overlaps with other one on this
	// address space"), so specs that may run beside others (the e2e suite:
	// parallel runs share the engine) leave it empty and read the
	// assigned subnet back (docker network inspect).
	Subnet string
	// IPv6Subnet, when set, turns IPv6 on for the network (enable_ipv6)
	// with this subnet ("fd12:3456:789a:1::/64"): docker has no IPv6
	// pool of its own to draw one from. Docker still gives every container
	// an IPv4 address too; the daemons keep off it with --family ipv6.
	IPv6Subnet string
}

// Spec is one test site: hosts on one network, or on several.
type Spec struct {
	Hosts []Host
	// Networks are the site's networks; empty: one, DefaultNetwork, with
	// a subnet docker assigns.
	Networks []Network
	// Image is the image reference; empty: ${TIMED_IMAGE:-timed-e2e:latest}.
	Image string
	// Run labels every container and the network (org.timed-project.e2e.run)
	// so that a run's leftovers can be found and removed; empty: the
	// TIMED_E2E_RUN variable, or "manual".
	Run string
}

// Default is the network of deploy/docker-compose.yml scaled to n hosts:
// every host may be master, offsets spread over ±2 s and drifts over
// ±40 ppm (deterministic, so the file is reproducible).
func Default(n int) Spec {
	s := Spec{}
	for i := range n {
		s.Hosts = append(s.Hosts, Host{
			Name:     fmt.Sprintf("host%d", i+1),
			Offset:   spread(i, n, 2*time.Second),
			DriftPPM: int(spread(i, n, 40)) * [2]int{1, -1}[i%2],
			Master:   true,
		})
	}
	return s
}

// spread places i of n evenly over [-span, +span].
func spread(i, n int, span time.Duration) time.Duration {
	if n == 1 {
		return 0
	}
	return -span + 2*span*time.Duration(i)/time.Duration(n-1)
}

// Args are the daemon's command-line arguments for h.
func (h Host) Args() []string {
	args := []string{
		"--profile", "fast",
		"--sync-interval", SyncInterval.String(),
		"--election-timeout-min", ElectionTimeoutMin.String(),
		"--election-timeout-max", ElectionTimeoutMax.String(),
		"--clock", fmt.Sprintf("sim:offset=%+dms,drift=%+dppm", h.Offset.Milliseconds(), h.DriftPPM),
		"--log-level", "debug",
	}
	if h.Offset%time.Millisecond != 0 {
		args[9] = fmt.Sprintf("sim:offset=%+dus,drift=%+dppm", h.Offset.Microseconds(), h.DriftPPM)
	}
	if h.Master && len(h.Trusted) == 0 {
		args = append(args, "-M")
	}
	if len(h.Trusted) > 0 {
		args = append(args, "--trusted", strings.Join(h.Trusted, ","))
	}
	return append(args, h.Extra...)
}

// AllNetworks is s.Networks, or the one default network when it lists none.
func (s Spec) AllNetworks() []Network {
	if len(s.Networks) == 0 {
		return []Network{{Name: DefaultNetwork}}
	}
	return s.Networks
}

// NetworksOf is the names of the networks h is attached to: h.Networks,
// or the spec's first network.
func (s Spec) NetworksOf(h Host) []string {
	if len(h.Networks) > 0 {
		return h.Networks
	}
	return []string{s.AllNetworks()[0].Name}
}

// Gateways are the hosts attached to two or more networks, in spec order.
func (s Spec) Gateways() []string {
	var out []string
	for _, h := range s.Hosts {
		if len(s.NetworksOf(h)) > 1 {
			out = append(out, h.Name)
		}
	}
	return out
}

var networkName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9._-]*$`)

// Check reports what would make the generated file wrong or refused: a
// network named twice or badly, a subnet that is not an IPv4 prefix or
// that overlaps another of the spec's, a host attached to a network the
// spec lacks or to one twice, two hosts of one name.
func (s Spec) Check() error {
	var errs []error
	nets := map[string]bool{}
	var subnets []netip.Prefix
	for _, n := range s.AllNetworks() {
		if !networkName.MatchString(n.Name) {
			errs = append(errs, fmt.Errorf("network %q: the name must be a letter, then letters, digits, '.', '_' or '-'", n.Name))
		}
		if nets[n.Name] {
			errs = append(errs, fmt.Errorf("network %q listed twice", n.Name))
		}
		nets[n.Name] = true
		if n.IPv6Subnet != "" {
			if p, err := netip.ParsePrefix(n.IPv6Subnet); err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p != p.Masked() {
				errs = append(errs, fmt.Errorf("network %q: IPv6 subnet %q is not an IPv6 network address and prefix length", n.Name, n.IPv6Subnet))
			}
		}
		if n.Subnet == "" {
			continue
		}
		p, err := netip.ParsePrefix(n.Subnet)
		if err != nil || !p.Addr().Is4() || p != p.Masked() {
			errs = append(errs, fmt.Errorf("network %q: subnet %q is not an IPv4 network address and prefix length", n.Name, n.Subnet))
			continue
		}
		for _, q := range subnets {
			if p.Overlaps(q) {
				errs = append(errs, fmt.Errorf("network %q: subnet %v overlaps %v", n.Name, p, q))
			}
		}
		subnets = append(subnets, p)
	}
	hosts := map[string]bool{}
	for _, h := range s.Hosts {
		if hosts[h.Name] {
			errs = append(errs, fmt.Errorf("host %q listed twice", h.Name))
		}
		hosts[h.Name] = true
		on := map[string]bool{}
		for _, n := range h.Networks {
			if !nets[n] {
				errs = append(errs, fmt.Errorf("host %q: no network %q in the spec", h.Name, n))
			}
			if on[n] {
				errs = append(errs, fmt.Errorf("host %q: attached to %q twice", h.Name, n))
			}
			on[n] = true
		}
	}
	return errors.Join(errs...)
}

// Generate renders the compose file (format 2.4, which docker-compose 1.x
// and the compose plugin both read). Check tells whether s is sound.
func Generate(s Spec) []byte {
	image := s.Image
	if image == "" {
		image = "${TIMED_IMAGE:-timed-e2e:latest}"
	}
	run := s.Run
	if run == "" {
		run = "${TIMED_E2E_RUN:-manual}"
	}
	nets := s.AllNetworks()
	where := "one bridge network (broadcast works there"
	if len(nets) > 1 {
		where = strconv.Itoa(len(nets)) + " bridge networks (broadcast works on each"
	}
	var b strings.Builder
	b.WriteString(`# Generated by ` + "`go run ./deploy/gen-compose`" + `; edit deploy/compose, not this file.
#
# ` + strconv.Itoa(len(s.Hosts)) + ` timed daemons on ` + where + `, so they
# find each other with their default interface discovery). Each runs on a
# simulated clock: the containers share the host's kernel clock, so no daemon
# may adjust it; they get NET_BIND_SERVICE (port 525) and NET_RAW (ICMP
# timestamps) only, never SYS_TIME.
#
#   make build && docker build -f deploy/Dockerfile -t timed-e2e:latest bin
#   docker-compose -f deploy/docker-compose.yml -p timed up -d
#   docker-compose -f deploy/docker-compose.yml -p timed exec host1 /timedc status
#   docker-compose -f deploy/docker-compose.yml -p timed down -v
`)
	if len(nets) > 1 {
		var parts []string
		for _, n := range nets {
			var on []string
			for _, h := range s.Hosts {
				for _, hn := range s.NetworksOf(h) {
					if hn == n.Name {
						on = append(on, h.Name)
					}
				}
			}
			parts = append(parts, fmt.Sprintf("%s (%s)", n.Name, strings.Join(on, ", ")))
		}
		fmt.Fprintf(&b, "#\n# Networks: %s.\n", strings.Join(parts, "; "))
		if gw := s.Gateways(); len(gw) > 0 {
			fmt.Fprintf(&b, "# Gateways, on several: %s.\n", strings.Join(gw, ", "))
		}
	}
	b.WriteString("version: \"2.4\"\nservices:\n")
	for _, h := range s.Hosts {
		fmt.Fprintf(&b, "  %s:\n", h.Name)
		fmt.Fprintf(&b, "    image: %q\n", image)
		fmt.Fprintf(&b, "    hostname: %s\n", h.Name)
		switch {
		case h.Witness && len(h.Entrypoint) > 0:
			b.WriteString("    # no timed\n")
			list(&b, "entrypoint", h.Entrypoint)
		case h.Witness:
			b.WriteString("    # no timed: an idle timedc prompt keeps the container (and its kernel's\n")
			b.WriteString("    # ICMP timestamp answers) alive\n")
			b.WriteString("    entrypoint: [\"/timedc\"]\n")
			b.WriteString("    stdin_open: true\n")
		default:
			b.WriteString("    command:\n")
			for _, a := range h.Args() {
				fmt.Fprintf(&b, "      - %q\n", a)
			}
		}
		list(&b, "volumes", h.Mounts)
		list(&b, "tmpfs", h.Tmpfs)
		b.WriteString("    cap_drop: [ALL]\n")
		b.WriteString("    cap_add: [NET_BIND_SERVICE, NET_RAW]\n")
		b.WriteString("    security_opt: [\"no-new-privileges:true\"]\n")
		b.WriteString("    init: false\n")
		b.WriteString("    stop_grace_period: 3s\n")
		fmt.Fprintf(&b, "    labels:\n      org.timed-project.e2e.run: %q\n", run)
		fmt.Fprintf(&b, "    networks: [%s]\n", strings.Join(s.NetworksOf(h), ", "))
	}
	b.WriteString("networks:\n")
	for _, n := range nets {
		fmt.Fprintf(&b, "  %s:\n    driver: bridge\n", n.Name)
		if n.IPv6Subnet != "" {
			b.WriteString("    enable_ipv6: true\n")
		}
		if n.Subnet != "" || n.IPv6Subnet != "" {
			b.WriteString("    ipam:\n      config:\n")
		}
		for _, sub := range []string{n.Subnet, n.IPv6Subnet} {
			if sub != "" {
				fmt.Fprintf(&b, "        - subnet: %q\n", sub)
			}
		}
		fmt.Fprintf(&b, "    labels:\n      org.timed-project.e2e.run: %q\n", run)
	}
	return []byte(b.String())
}

// list writes a service's list-valued key, unless the list is empty.
func list(b *strings.Builder, key string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "    %s:\n", key)
	for _, it := range items {
		fmt.Fprintf(b, "      - %q\n", it)
	}
}
