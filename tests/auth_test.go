package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/udp"
)

// writeKeys writes a chrony-format key file readable by its owner only.
func writeKeys(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "timed.keys")
	keys := "# test keys\n1 SHA256 HEX:" + strings.Repeat("5a", 32) + "\n2 SHA512 ASCII:another-test-key-of-enough-length\n"
	if err := os.WriteFile(path, []byte(keys), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestAuthRequired: daemons that require signatures elect one master and
// converge, and an unsigned packet, however well formed, is dropped before
// it reaches the election: the forged ADJTIME in the master's name moves
// nothing and is counted as unsigned.
func TestAuthRequired(t *testing.T) {
	t.Parallel()
	keys := writeKeys(t)
	c := newAttackCluster(t, "--auth", "required", "--auth-keys", keys, "--state-dir", "$STATE")
	a := newAttacker(t)
	before, st := c.offsets(), c.snapshot(c.slaves[0])
	a.send(c.slaves[0], tsp.Packet{Type: tsp.AdjTime, Seq: 9, Time: durationTimeval(t, 4995*time.Second), Name: c.master.name})
	c.awaitDrop(c.slaves[0], "auth unsigned", st, 1)
	c.held("unsigned ADJTIME under required auth", before)

	// timedc signs with the key file, so its msite and clockdiff are
	// heard; without it, the daemon drops its packets.
	target := "127.0.0.1:" + strconv.Itoa(c.slaves[1].port)
	out, err := timedc(t, "--auth-keys", keys, "--json", "msite", target)
	if err != nil || !strings.Contains(out, `"master": "`+c.master.name+`"`) {
		t.Fatalf("signed msite: %v: %s", err, out)
	}
	if out, err := timedc(t, "--auth-keys", keys, "--json", "clockdiff", target); err != nil || !strings.Contains(out, `"method": "probe"`) {
		t.Fatalf("signed clockdiff: %v: %s", err, out)
	}
	st = c.snapshot(c.slaves[1])
	if _, err := timedc(t, "--timeout", "1s", "msite", target); err == nil {
		t.Fatal("an unsigned msite was answered under required auth")
	}
	c.awaitDrop(c.slaves[1], "auth unsigned", st, 1)
}

// TestAuthOptionalAdmitsBSD: signing daemons in optional mode take a
// daemon that does not sign (as a BSD host) into the election when its
// address is an unsigned peer, and the clocks converge, wherever the
// master ends up.
func TestAuthOptionalAdmitsBSD(t *testing.T) {
	t.Parallel()
	keys := writeKeys(t)
	c := newClusterPeers(t, make([]time.Duration, 3), func(i int, _ string) []string {
		args := []string{"-M", "--clock", "sim:offset=0us,drift=0ppm"}
		if i < 2 {
			args = append(args, "--auth", "optional", "--auth-keys", keys, "--unsigned-peers", "127.0.0.1/32")
		}
		return args
	})
	c.awaitOneMaster()
	c.noAuthDrops()
}

// noAuthDrops asserts that no node dropped a datagram on auth.
func (c *cluster) noAuthDrops() {
	c.t.Helper()
	st, err := c.statuses()
	if err != nil {
		c.t.Fatal(err)
	}
	for n, s := range st {
		for reason, count := range s.Drops {
			if strings.HasPrefix(reason, udp.AuthDropPrefix) {
				c.t.Errorf("%s dropped %d datagrams on auth (%s): %v", n.name, count, reason, s.Drops)
			}
		}
	}
}
