package simnet

import (
	"bufio"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/tsp"
)

var update = flag.Bool("update", false, "rewrite testdata/*.txt with the output of this run")

// TestGolden runs the interaction scripts of testdata/*.txt, in the style
// of etcd-io/raft's: each block is a command, a "----" line, and the
// output the command must print (every packet sent, every state change,
// with the virtual time), then a blank line. Lines starting with '#' are
// comments. go test -run TestGolden -update rewrites the expected output.
//
// Commands:
//
//	nodes N [noneligible=n3,n4] [trusted=n1,n2]  N nodes n1…nN (fast timers, answer delay 0, 1 ms links)
//	topology A=a1,gw B=gw,b1 [noneligible=b1]     networks A, B…, each with its nodes; a node on several is a gateway
//	         [noext=a1,b1]                        (noext: nodes that drop version 2 and send none, as BSD's)
//	start n1 n2 … | start all                    boot nodes now
//	run 2s [quiet]                                advance virtual time (quiet: no packet lines)
//	elect n2 n3 gw/B                              ForceElection (timedc election / TEST), all at the same instant;
//	                                              node/network for a gateway's other networks
//	crash n1 / restart n1
//	partition n1 n2 | n3 n4                       (unnamed nodes form a further group)
//	partition B: b1 | gw b2                       the same on one network of a topology
//	heal
//	status                                        state, master or slave list of every node
//	sources                                       each site's networks, time sources, and any cycle of gateways
//	stats                                         datagrams sent by type since the last stats
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

type block struct {
	pre  []string // comment lines before the command
	cmd  string
	want []string
}

func parseScript(t *testing.T, path string) []block {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []block
	var cur block
	inOut := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case inOut && line == "":
			out = append(out, cur)
			cur, inOut = block{}, false
		case inOut:
			cur.want = append(cur.want, line)
		case line == "----":
			if cur.cmd == "" {
				t.Fatalf("%s: ---- without a command", path)
			}
			inOut = true
		case line == "" || strings.HasPrefix(line, "#"):
			if cur.cmd == "" {
				cur.pre = append(cur.pre, line)
			}
		default:
			if cur.cmd != "" {
				t.Fatalf("%s: command %q without ----", path, cur.cmd)
			}
			cur.cmd = line
		}
	}
	if inOut || cur.cmd != "" {
		out = append(out, cur)
	}
	return out
}

func runScript(t *testing.T, path string) {
	blocks := parseScript(t, path)
	env := &scriptEnv{t: t}
	var rewritten strings.Builder
	failed := false
	for i := range blocks {
		b := &blocks[i]
		got := env.exec(b.cmd)
		if len(got) == 0 {
			got = []string{"ok"}
		}
		if !slices.Equal(got, b.want) && !*update {
			t.Errorf("%s: %s\n--- want\n%s\n--- got\n%s", path, b.cmd, strings.Join(b.want, "\n"), strings.Join(got, "\n"))
			failed = true
		}
		for _, l := range b.pre {
			rewritten.WriteString(l + "\n")
		}
		rewritten.WriteString(b.cmd + "\n----\n" + strings.Join(got, "\n") + "\n\n")
	}
	env.checkOK()
	if *update && !failed {
		if err := os.WriteFile(path, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type scriptEnv struct {
	t      *testing.T
	net    *Net
	check  *Checker
	mcheck *MultiChecker
	out    []string
	mark   Stats
	quiet  bool
}

func (e *scriptEnv) checkOK() {
	if e.check != nil {
		checkOK(e.t, e.check)
	}
	if e.mcheck != nil && e.mcheck.Err != nil {
		e.t.Fatalf("invariant violated: %v\nstatus:\n%s", e.mcheck.Err, joinLines(e.net.Status()))
	}
}

// goldenConfig is the fast profile with no answer delay: the scripts'
// timings then read exactly.
func goldenConfig(name string) election.Config {
	c := election.FastConfig(name)
	c.AnswerDelay = 0
	return c
}

// trace records a trace line, unless quiet and it is a packet's.
func (e *scriptEnv) trace(s string) {
	if e.quiet && (strings.Contains(s, " > ") || strings.HasSuffix(s, "(no such host)")) {
		return
	}
	e.out = append(e.out, s)
}

func (e *scriptEnv) setup(n *Net) {
	e.net = n
	n.SetLink(Link{MinLatency: time.Millisecond, MaxLatency: time.Millisecond})
	n.Trace(e.trace)
	n.OnNetAction = func(nd *Node, net int, a election.Action) {
		if s, ok := a.(election.SlaveList); ok {
			e.out = append(e.out, fmt.Sprintf("%9.3fs %s %v", n.Elapsed().Seconds(), n.label(nd, net), s))
		}
	}
	e.mark = cloneStats(n.Stats)
}

// topology builds networks and nodes from "A=a1,gw B=gw,b1" (and
// noneligible=…, noext=…): nodes in order of first mention.
func (e *scriptEnv) topology(args []string) {
	n := New(1)
	flags := map[string]map[string]bool{"noneligible": {}, "noext": {}}
	on := map[string][]int{}
	var order []string
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		if set, ok := flags[k]; ok {
			for _, name := range strings.Split(v, ",") {
				set[name] = true
			}
			continue
		}
		id := len(n.Networks) - 1
		if id > 0 || n.Networks[0].Name != "net0" {
			id = n.AddNetwork(k)
		} else {
			n.Networks[0].Name = k
		}
		for _, name := range strings.Split(v, ",") {
			if on[name] == nil {
				order = append(order, name)
			}
			on[name] = append(on[name], id)
		}
	}
	for _, name := range order {
		c := goldenConfig(name)
		c.MayBeMaster = !flags["noneligible"][name]
		n.AddOn(c, on[name]...).NoExt = flags["noext"][name]
	}
	e.setup(n)
	e.mcheck = CheckMulti(n, goldenConfig("x"))
}

// target is a node, or node/network for one of a gateway's networks.
func (e *scriptEnv) target(a string) (*Node, int) {
	name, netName, ok := strings.Cut(a, "/")
	nd := e.node(name)
	if !ok {
		return nd, 0
	}
	w := e.net.NetworkByName(netName)
	if w == nil || nd.local(w.ID) < 0 {
		e.t.Fatalf("%s is not on network %q", name, netName)
	}
	return nd, nd.local(w.ID)
}

func (e *scriptEnv) node(name string) *Node {
	nd := e.net.Node(name)
	if nd == nil {
		e.t.Fatalf("no node %q", name)
	}
	return nd
}

func (e *scriptEnv) exec(cmd string) []string {
	e.out = nil
	f := strings.Fields(cmd)
	args := f[1:]
	switch f[0] {
	case "nodes":
		count, err := strconv.Atoi(args[0])
		if err != nil {
			e.t.Fatalf("nodes: %v", err)
		}
		opts := map[string][]string{}
		for _, a := range args[1:] {
			k, v, _ := strings.Cut(a, "=")
			opts[k] = strings.Split(v, ",")
		}
		n := New(1)
		n.AddN(count, func(name string) election.Config {
			c := goldenConfig(name)
			c.MayBeMaster = !slices.Contains(opts["noneligible"], name)
			return c
		})
		// -F lists name hosts; the machine trusts their addresses.
		var trusted []netip.AddrPort
		for _, name := range opts["trusted"] {
			if nd := n.Node(name); nd != nil {
				trusted = append(trusted, nd.Addr)
			}
		}
		for _, nd := range n.Nodes {
			nd.Cfg.Trusted = trusted
		}
		e.check = Check(n, n.Nodes[0].Cfg)
		e.setup(n)
	case "topology":
		e.topology(args)
	case "start":
		for _, nd := range e.nodes(args) {
			e.net.Start(nd)
		}
	case "restart":
		for _, nd := range e.nodes(args) {
			e.net.Start(nd)
		}
	case "crash":
		for _, nd := range e.nodes(args) {
			e.net.Crash(nd)
		}
	case "run":
		d, err := time.ParseDuration(args[0])
		if err != nil {
			e.t.Fatalf("run: %v", err)
		}
		e.quiet = len(args) > 1 && args[1] == "quiet"
		e.net.Run(d)
		e.quiet = false
	case "elect":
		for _, a := range args {
			nd, net := e.target(a)
			e.net.StepNet(nd, net, election.ForceElection{})
		}
	case "partition":
		k := 0
		if len(args) > 0 && strings.HasSuffix(args[0], ":") {
			w := e.net.NetworkByName(strings.TrimSuffix(args[0], ":"))
			if w == nil {
				e.t.Fatalf("no network %q", args[0])
			}
			k, args = w.ID, args[1:]
		}
		var groups [][]int
		var g []int
		for _, a := range append(args, "|") {
			if a == "|" {
				groups = append(groups, g)
				g = nil
				continue
			}
			g = append(g, e.node(a).ID)
		}
		e.net.PartitionNet(k, groups...)
	case "heal":
		e.net.Heal()
	case "status":
		e.out = append(e.out, e.net.Status()...)
	case "sources":
		for _, site := range e.net.Sites() {
			e.out = append(e.out, fmt.Sprintf("site %s: time sources %v", strings.Join(e.net.netNames(site), " "), names(e.net.Sources(site))))
		}
		if c := e.net.FollowCycle(); c != nil {
			e.out = append(e.out, fmt.Sprintf("cycle %v", names(c)))
		}
	case "stats":
		var types []tsp.Type
		for ty := range e.net.Stats.Sent {
			types = append(types, ty)
		}
		slices.Sort(types)
		total := 0
		for _, ty := range types {
			if d := e.net.Stats.Sent[ty] - e.mark.Sent[ty]; d > 0 {
				e.out = append(e.out, fmt.Sprintf("%v %d", ty, d))
				total += d
			}
		}
		e.out = append(e.out, fmt.Sprintf("total %d", total))
		e.mark = cloneStats(e.net.Stats)
	default:
		e.t.Fatalf("unknown command %q", cmd)
	}
	e.checkOK()
	return e.out
}

func (e *scriptEnv) nodes(args []string) []*Node {
	if len(args) == 1 && args[0] == "all" {
		return e.net.Nodes
	}
	var out []*Node
	for _, a := range args {
		out = append(out, e.node(a))
	}
	return out
}

func cloneStats(s Stats) Stats {
	c := newStats()
	for k, v := range s.Sent {
		c.Sent[k] = v
	}
	for k, v := range s.Delivered {
		c.Delivered[k] = v
	}
	c.Lost = s.Lost
	return c
}
