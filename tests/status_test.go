package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/timed-project/timed/timed/control"
)

// TestStatusAndSources runs `timedc status` and `timedc sources`, text and
// JSON, against three daemons: once the rounds run, every host says it is
// synchronised; the master lists its two slaves, measured by probe and
// kept in the network time; each slave lists its master. The master keeps
// a drift file, which it writes when it stops.
func TestStatusAndSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	drift := func(i int) string { return filepath.Join(dir, fmt.Sprintf("drift%d", i+1)) }
	c := newCluster(t, fiveOffsets[:3], func(i int) []string { return []string{"-M", "--drift-file", drift(i)} })
	m := c.awaitOneMaster()
	var slaves []*node
	for _, n := range c.nodes {
		if n != m {
			slaves = append(slaves, n)
		}
	}
	// A round a second: each slave's correction within two, and the
	// master's round having measured both slaves.
	c.await("all synchronised, the master's slaves kept", electionBound, func() (bool, string) {
		st, err := c.statuses()
		if err != nil {
			return false, err.Error()
		}
		for n, s := range st {
			if s.Sync == nil || s.Sync.State != control.Synchronised {
				return false, fmt.Sprintf("%s: %+v", n.name, s.Sync)
			}
		}
		var src []control.Source
		if err := oneAnswerOf(t, &struct {
			Sources *[]control.Source `json:"sources"`
		}{&src}, "--json", "sources", "--control-socket", m.socket()); err != nil {
			return false, err.Error()
		}
		for _, s := range src {
			if s.State != "kept" || s.Reach&1 == 0 {
				return false, fmt.Sprintf("%s %s reach %o", s.Name, s.State, s.Reach)
			}
		}
		return len(src) == 2, fmt.Sprintf("%d sources", len(src))
	})

	// The master's status, text: the sync state first, then its role.
	out, err := timedc(t, "status", "--control-socket", m.socket())
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "synchronised: master on ") || !strings.Contains(lines[0], "measured 2 of 2 slaves") ||
		!strings.HasPrefix(lines[1], m.name+" is master for ") || !strings.Contains(out, "from network time (estimated from this master's round") {
		t.Errorf("master's status:\n%s", out)
	}

	// A slave's, JSON: its estimate rests on the master's correction.
	var st control.Status
	out, err = timedc(t, "--json", "status", "--control-socket", slaves[0].socket())
	if err != nil || oneAnswer(out, &st) != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if y := st.Sync; y == nil || y.Basis != "correction" || y.BasisFrom != m.name || y.OffsetSecs == nil || y.ErrorBoundSecs != nil ||
		y.LastCorrectionAgeSecs == nil || y.SyncIntervalSecs != syncInterval.Seconds() {
		t.Errorf("slave's sync %+v", st.Sync)
	}
	if len(st.Networks) != 1 || !st.Networks[0].Served || st.Networks[0].State != "slave" || st.Networks[0].Master == nil ||
		st.Networks[0].Master.Name != m.name || st.State != "slave" {
		t.Errorf("slave's networks %+v", st.Networks)
	}

	// The master's sources, text: a row per slave.
	out, err = timedc(t, "sources", "--control-socket", m.socket())
	if err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 3 || !strings.HasPrefix(rows[0], "NAME ") {
		t.Fatalf("master's sources:\n%s", out)
	}
	var names []string
	for _, r := range rows[1:] {
		f := strings.Fields(r)
		// NAME ADDRESS ROLE STATE REACH OFFSET(2) ERROR(2) RTT(2) AGE METHOD STAMPS:
		// on loopback both daemons get the kernel's transmit stamps.
		if len(f) != 14 || f[2] != "slave" || f[3] != "kept" || f[12] != "probe" || f[13] != "kernel" || f[1] != "127.0.0.1:"+strconv.Itoa(nodeNamed(c, f[0]).port) {
			t.Errorf("row %q", r)
		}
		names = append(names, f[0])
	}
	if want := []string{slaves[0].name, slaves[1].name}; !slices.Equal(names, want) {
		t.Errorf("rows for %v, want %v", names, want)
	}

	// A slave's sources, JSON: its master, its corrections reaching it.
	var src []control.Source
	if err := oneAnswerOf(t, &struct {
		Sources *[]control.Source `json:"sources"`
	}{&src}, "--json", "sources", "--control-socket", slaves[1].socket()); err != nil {
		t.Fatal(err)
	}
	if len(src) != 1 || src[0].Name != m.name || src[0].Role != "master" || src[0].State != "current" || src[0].Reach&1 == 0 ||
		src[0].Method != "probe" || src[0].OffsetSecs == nil || src[0].RTTSecs != nil {
		t.Errorf("slave's sources %+v", src)
	}

	// The drift file: written at stop, one number of ppm.
	c.kill(m, syscall.SIGTERM)
	b, err := os.ReadFile(drift(slices.Index(c.nodes, m)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strconv.ParseFloat(strings.TrimSpace(string(b)), 64); err != nil {
		t.Errorf("drift file %q: %v", b, err)
	}
}

// oneAnswerOf runs timedc with args and decodes its one answer into v.
func oneAnswerOf(t *testing.T, v any, args ...string) error {
	t.Helper()
	out, err := timedc(t, args...)
	if err != nil {
		return err
	}
	return oneAnswer(out, v)
}

func nodeNamed(c *cluster, name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	c.t.Fatalf("no node %s", name)
	return nil
}
