package archtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/timed-project/timed"

// pkg is the part of `go list -json` the rules read.
type pkg struct {
	ImportPath string
	Imports    []string
	DepOnly    bool // a dependency, not matched by the patterns
}

// graph is `go list -deps` of some patterns: the packages they match
// (roots) and every package those depend on, by import path.
type graph struct {
	roots []string
	pkgs  map[string]pkg
}

// list runs `go list -deps -json` on patterns (relative to the module).
func list(t *testing.T, patterns ...string) graph {
	t.Helper()
	gobin, err := exec.LookPath("go") // go test puts its own GOROOT/bin first
	if err != nil {
		t.Fatalf("no go command to list dependencies with: %v", err)
	}
	args := []string{"list", "-deps", "-json=ImportPath,Imports,DepOnly"}
	for _, p := range patterns {
		args = append(args, module+"/"+p)
	}
	cmd := exec.Command(gobin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	g := graph{pkgs: map[string]pkg{}}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		g.pkgs[p.ImportPath] = p
		if !p.DepOnly {
			g.roots = append(g.roots, p.ImportPath)
		}
	}
	if len(g.roots) == 0 {
		t.Fatalf("go list %v matched no package: a rule names a package that has moved", patterns)
	}
	return g
}

// chain is the shortest import chain from root to target, both included,
// or nil when root does not depend on target.
func (g graph) chain(root, target string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == target {
			var c []string
			for ; p != ""; p = prev[p] {
				c = append(c, p)
			}
			slices.Reverse(c)
			return c
		}
		for _, imp := range g.pkgs[p].Imports {
			if _, seen := prev[imp]; !seen {
				prev[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

// above is, for every package of the module outside floor (a folder,
// "internal/") that root depends on, the import chain that brings it in,
// in import-path order.
func (g graph) above(root, floor string) [][]string {
	paths := slices.Sorted(maps.Keys(g.pkgs))
	var chains [][]string
	for _, p := range paths {
		if p == module || !strings.HasPrefix(p, module+"/") || strings.HasPrefix(p, module+"/"+floor) {
			continue
		}
		if c := g.chain(root, p); c != nil {
			chains = append(chains, c)
		}
	}
	return chains
}

func short(path string) string {
	if path == module {
		return path
	}
	return strings.TrimPrefix(path, module+"/")
}

func render(c []string) string {
	s := make([]string, len(c))
	for i, p := range c {
		s[i] = short(p)
	}
	return strings.Join(s, " → ")
}

// forbid fails for every package matched by patterns that depends on
// target, naming the import chain that brings it in.
func forbid(t *testing.T, target, why string, patterns ...string) {
	t.Helper()
	g := list(t, patterns...)
	for _, root := range g.roots {
		if c := g.chain(root, target); c != nil {
			t.Errorf("%s depends on %s (%s): %s", short(root), short(target), why, render(c))
		}
	}
}

func TestPurePackagesStayOffTheNetwork(t *testing.T) {
	forbid(t, "net", "the election is a pure state machine: events in, actions out",
		"election/...")
	forbid(t, "net", "tsp is the wire format; sockets are tsp/udp's", "tsp")
}

func TestClocksyncUsesOnlyTheWireFormat(t *testing.T) {
	forbid(t, module+"/tsp/udp", "clocksync needs the wire format, not the daemon's transport",
		"clocksync/...")
}

// TestInternalIsTheGroundFloor: internal/ holds what the lower layers
// stand on (socket options, rate limits, virtual time, the BSD vectors,
// the test-summary tool), so none of it may depend on a package of the
// module outside internal/: not on the transport or the keys (tsp/udp,
// tsp/auth), the clocks (clocksync), the election or the configuration.
// What sits above those (benchmark harnesses, the man-page generator)
// lives beside its users: bench/, cmd/internal/.
func TestInternalIsTheGroundFloor(t *testing.T) {
	g := list(t, "internal/...")
	for _, root := range g.roots {
		for _, c := range g.above(root, "internal/") {
			t.Errorf("%s depends on %s, which stands above internal/: %s", short(root), short(c[len(c)-1]), render(c))
		}
	}
}

// TestAboveFindsWhatStandsAbove keeps the ground-floor rule honest: the
// man-page generator reads config, and above must say so, or the rule
// above could pass by finding nothing at all.
func TestAboveFindsWhatStandsAbove(t *testing.T) {
	g := list(t, "cmd/internal/gendocs")
	var found []string
	for _, c := range g.above(module+"/cmd/internal/gendocs", "cmd/internal/") {
		found = append(found, short(c[len(c)-1]))
	}
	if !slices.Contains(found, "config") {
		t.Errorf("above(cmd/internal/gendocs) = %v, want config among them", found)
	}
}

// TestWireFormatDoesNoIO: tsp itself imports nothing that does I/O. fmt
// brings os in further down; that is fmt's, not tsp's.
func TestWireFormatDoesNoIO(t *testing.T) {
	g := list(t, "tsp")
	for _, imp := range g.pkgs[module+"/tsp"].Imports {
		switch imp {
		case "net", "os", "syscall":
			t.Errorf("tsp imports %s: the wire format encodes and decodes bytes, and does no I/O", imp)
		}
	}
}

// TestChainIsFound keeps the rules honest: the transport does depend on
// net, and the chain found for it starts at the transport and ends at net.
// Were go list's output to change so that nothing is ever found, this
// fails instead of every rule passing.
func TestChainIsFound(t *testing.T) {
	g := list(t, "tsp/udp")
	c := g.chain(module+"/tsp/udp", "net")
	if len(c) < 2 || c[0] != module+"/tsp/udp" || c[len(c)-1] != "net" {
		t.Fatalf("chain from tsp/udp to net: %v", c)
	}
	if c := g.chain(module+"/tsp/udp", "no/such/package"); c != nil {
		t.Errorf("chain to a package nobody imports: %v", c)
	}
	if got := render([]string{module + "/election", module + "/tsp", "fmt"}); got != "election → tsp → fmt" {
		t.Errorf("render: %q", got)
	}
}
