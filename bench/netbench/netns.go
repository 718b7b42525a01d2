package netbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Net is one run's bridge and namespaces. It records what it made as it
// makes it, so Close removes exactly that, whatever step failed.
type Net struct {
	Names   Names
	N       int
	bridge  bool
	netns   []string
	hostEnd []string
	rule    []string // the iptables rule Setup inserted, to delete
	neigh   []neighSaved
}

// ip runs ip(8) with args.
func ip(ctx context.Context, args ...string) error { return command(ctx, "ip", args...) }

// command runs name with args in a process group of its own, so that the
// terminal's Ctrl-C (a second one too) cannot cut the cleanup short; its
// output goes into the error.
func command(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Setup makes a bridge and n namespaces, each with a veth on the bridge
// (eth0 there, with its Addr) and loopback up, and raises the kernel's
// neighbour-table limits, which the namespaces share, to fit n (neigh.go;
// Close puts them back). On error, what was made is
// still in the returned Net: Close it.
func Setup(ctx context.Context, names Names, n int) (*Net, error) {
	nt := &Net{Names: names, N: n}
	if err := Check(n); err != nil {
		return nt, err
	}
	// Each command runs to its end, so that nothing is made that the Net
	// does not know of; an interrupt is seen between commands. A name is
	// recorded before the command that makes it, and Close passes over
	// what is not there.
	run := func(args ...string) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return ip(context.WithoutCancel(ctx), args...)
	}
	br := names.Bridge()
	nt.bridge = true
	// No multicast snooping: an IPv6 link's group datagrams flood the
	// bridge at once, with no MLD report to wait for.
	if err := run("link", "add", br, "type", "bridge", "stp_state", "0", "forward_delay", "0", "mcast_snooping", "0",
		"nf_call_iptables", "0", "nf_call_ip6tables", "0", "nf_call_arptables", "0"); err != nil {
		return nt, err
	}
	if err := run("link", "set", br, "up"); err != nil {
		return nt, err
	}
	if err := nt.acceptForward(context.WithoutCancel(ctx)); err != nil {
		return nt, err
	}
	// The namespaces share the kernel's neighbour tables (neigh.go).
	saved, err := raiseNeigh(NeighEntries(n))
	nt.neigh = saved
	if err != nil {
		return nt, fmt.Errorf("neighbour tables: %w", err)
	}
	bits := strconv.Itoa(Subnet.Bits())
	for i := range n {
		ns := names.Netns(i)
		nt.netns = append(nt.netns, ns)
		if err := run("netns", "add", ns); err != nil {
			return nt, err
		}
		host, peer := names.Veth(i)
		nt.hostEnd = append(nt.hostEnd, host)
		for _, args := range [][]string{
			{"link", "add", host, "type", "veth", "peer", "name", peer},
			{"link", "set", host, "master", br, "up"},
			{"link", "set", peer, "netns", ns},
			{"-n", ns, "link", "set", peer, "name", "eth0"},
			{"-n", ns, "addr", "add", names.Addr(i).String() + "/" + bits, "brd", "+", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if err := run(args...); err != nil {
				return nt, err
			}
		}
	}
	return nt, nil
}

// Family is what a namespace's eth0 holds.
type Family int

const (
	IPv4 Family = iota // IPv4 only (IPv6 disabled on eth0): what Setup makes
	IPv6               // IPv6 only: Names.LinkLocal and Names.Addr6, no IPv4 at all
	Dual               // both
)

func (f Family) String() string { return [...]string{"IPv4", "IPv6", "dual-stack"}[f] }

// ParseFamily reads ipv4, ipv6 or dual.
func ParseFamily(s string) (Family, error) {
	switch strings.ToLower(s) {
	case "ipv4":
		return IPv4, nil
	case "ipv6":
		return IPv6, nil
	case "dual":
		return Dual, nil
	}
	return 0, fmt.Errorf("family %q: accepted ipv4, ipv6, dual", s)
}

// Readdress gives namespace i's eth0 the addresses of family f. The IPv6
// ones are added with nodad, usable at once: no second of duplicate
// address detection, during which the kernel would send from another.
func (nt *Net) Readdress(ctx context.Context, i int, f Family) error {
	ns := nt.Names.Netns(i)
	var steps [][]string
	switch f {
	case IPv4:
		return command(ctx, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.eth0.disable_ipv6=1")
	case IPv6:
		steps = append(steps, []string{"-n", ns, "addr", "flush", "dev", "eth0"}) // IPv4 and its route too
	case Dual:
		steps = append(steps, []string{"-n", ns, "-6", "addr", "flush", "dev", "eth0"})
	}
	steps = append(steps,
		[]string{"-n", ns, "addr", "add", nt.Names.LinkLocal(i).String() + "/64", "dev", "eth0", "nodad"},
		[]string{"-n", ns, "addr", "add", netip.PrefixFrom(nt.Names.Addr6(i), Subnet6.Bits()).String(), "dev", "eth0", "nodad"})
	for _, args := range steps {
		if err := ip(ctx, args...); err != nil {
			return err
		}
	}
	return nil
}

// Close removes the namespaces (and with them the veths), any veth end
// left on the host, and the bridge. The daemons must have exited: a
// process in a namespace keeps its interfaces alive. It goes on past
// errors and returns them all.
func (nt *Net) Close() error {
	// Not the run's context: it is cancelled on Ctrl-C, and the cleanup
	// must still run then.
	ctx := context.Background()
	var errs []error
	// The host ends first: deleting one deletes its peer at once, where
	// a deleted namespace's interfaces go some time later.
	for _, h := range nt.hostEnd {
		if _, err := net.InterfaceByName(h); err != nil {
			continue // never made
		}
		if err := ip(ctx, "link", "del", h); err != nil {
			errs = append(errs, err)
		}
	}
	for _, ns := range nt.netns {
		if _, err := os.Stat("/run/netns/" + ns); err != nil {
			continue
		}
		if err := ip(ctx, "netns", "del", ns); err != nil {
			errs = append(errs, err)
		}
	}
	if nt.rule != nil {
		if err := command(ctx, "iptables", append([]string{"-D"}, nt.rule...)...); err != nil {
			errs = append(errs, err)
		}
	}
	if _, err := net.InterfaceByName(nt.Names.Bridge()); err == nil && nt.bridge {
		if err := ip(ctx, "link", "del", nt.Names.Bridge()); err != nil {
			errs = append(errs, err)
		}
	}
	if err := restoreNeigh(nt.neigh); err != nil {
		errs = append(errs, err)
	}
	nt.netns, nt.hostEnd, nt.bridge, nt.rule, nt.neigh = nil, nil, false, nil, nil
	return errors.Join(errs...)
}

// acceptForward lets frames between the bridge's ports through the
// host's firewall. With br_netfilter and bridge-nf-call-iptables on (as
// Docker leaves them), bridged IPv4 traverses iptables' FORWARD chain,
// whose policy Docker sets to DROP; the bridge's own nf_call_iptables
// cannot turn the global setting off. The rule names the run's bridge
// only, and Close deletes it.
func (nt *Net) acceptForward(ctx context.Context) error {
	b, err := os.ReadFile("/proc/sys/net/bridge/bridge-nf-call-iptables")
	if err != nil || strings.TrimSpace(string(b)) != "1" {
		return nil // no br_netfilter, or it leaves bridges alone
	}
	br := nt.Names.Bridge()
	rule := []string{"FORWARD", "-i", br, "-o", br, "-j", "ACCEPT", "-m", "comment", "--comment", "bench-net " + nt.Names.Run}
	args := append([]string{"-I", rule[0], "1"}, rule[1:]...)
	if err := command(ctx, "iptables", args...); err != nil {
		return err
	}
	nt.rule = rule
	return nil
}

// Left lists what of this run is still there: namespaces and links whose
// names are the run's. Empty after a clean Close.
func Left(names Names) ([]string, error) {
	var left []string
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil, fmt.Errorf("ip netns list: %w", err)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, Prefix+"-"+names.Run+"-") {
			left = append(left, "netns "+f)
		}
	}
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	for _, i := range ifs {
		if strings.HasPrefix(i.Name, names.Bridge()) {
			left = append(left, "link "+i.Name)
		}
	}
	if out, err := exec.Command("iptables", "-S", "FORWARD").Output(); err == nil {
		for line := range strings.Lines(string(out)) {
			if strings.Contains(line, names.Bridge()) {
				left = append(left, "iptables "+strings.TrimSpace(line))
			}
		}
	}
	return left, nil
}

// DialIn connects to addr (TCP) from inside the namespace ns: the socket
// is made on an OS thread moved into ns and stays there; the thread is
// moved back before it is released (and dropped if it cannot be).
func DialIn(ctx context.Context, ns, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		c, back, err := dialIn(ctx, ns, addr)
		if back {
			runtime.UnlockOSThread()
		} // else the thread ends with the goroutine, in the wrong namespace
		ch <- result{c, err}
	}()
	r := <-ch
	return r.c, r.err
}

// dialIn runs on a locked thread; back says the thread is in its own
// namespace again.
func dialIn(ctx context.Context, ns, addr string) (c net.Conn, back bool, err error) {
	self, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("own netns: %w", err)
	}
	defer unix.Close(self)
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, fmt.Errorf("netns %s: %w", ns, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("setns %s: %w", ns, err)
	}
	var d net.Dialer
	c, err = d.DialContext(ctx, "tcp", addr)
	back = unix.Setns(self, unix.CLONE_NEWNET) == nil
	return c, back, err
}
