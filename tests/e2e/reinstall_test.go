//go:build e2e

package e2e

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
	"github.com/timed-project/timed/tsp/udp"
)

// dropNoEcho counts corrections that do not echo the receiver's nonce of
// its current run (issue 21).
var dropNoEcho = udp.AuthDropPrefix + auth.ReasonNoEcho.String()

// TestReplayAfterReinstall is issue 21's fall, on the bridge: three
// daemons with --auth required and their state directory on a tmpfs. A
// slave is restarted (its state goes with the tmpfs) and its master sets
// its clock at once (SETTIME); tcpdump on the bridge records that
// unicast, which the attacker's own port never sees. Then every daemon is
// restarted: every state directory is new, as after a reinstall, and
// every sender identity and nonce too. The attacker sends the recorded
// SETTIME, byte for byte, to every slave from the address of the master
// each follows now (the MAC covers no address), so that only
// authentication stands between it and the clock: the capture is inside
// the one-hour first-contact window, and before the fix it was taken as a
// first contact and set the slave back by its age. Now every slave drops
// it for want of the echo of its nonce, and no clock moves.
func TestReplayAfterReinstall(t *testing.T) {
	c, master, slaves := settledAttackCluster(t, authSpec(t))

	// A SETTIME, recorded on the bridge as the restarted slave rejoins.
	cp := c.startCapture()
	if _, err := c.compose(2*time.Minute, "restart", "-t", "2", slaves[0]); err != nil {
		t.Fatal(err)
	}
	if m, _ := c.awaitOneMaster(coldStartBound); m != master {
		t.Fatalf("%s is master after %s's restart, not %s", m, slaves[0], master)
	}
	cp.stop()
	set, from, err := firstSigned(cp.file, tsp.SetTime, netip.MustParseAddr(c.ip(master)))
	if err != nil {
		t.Fatal(err)
	}
	recorded := time.Now()
	p, _ := tsp.Unmarshal(set)
	report(t, "recorded", "%s seq %d of %s, %d bytes signed, from %v", p.Type, p.Seq, p.Name, len(set), from)

	// The reinstall: every daemon restarted, every tmpfs new.
	if _, err := c.compose(2*time.Minute, append([]string{"restart", "-t", "2"}, c.names()...)...); err != nil {
		t.Fatal(err)
	}
	now, _ := c.awaitOneMaster(coldStartBound)
	c.awaitSettled(now)
	port, _ := daemonPorts(c)
	var targets []string
	var rises []rise
	for _, h := range c.names() {
		if h != now {
			targets = append(targets, port(h))
			rises = append(rises, rise{h, dropNoEcho, 1})
		}
	}
	var age time.Duration
	c.underAttack(now, func() {
		age = time.Since(recorded)
		c.attack(time.Minute, "resend", "-hex", hex.EncodeToString(set), "-to", strings.Join(targets, ","), "-spoof", port(now))
	}, rises...)
	report(t, "replayed after the reinstall", "the recorded SETTIME, %v after its recording (inside the %v window), to %d slaves from %s's address: dropped, no echo of their nonce",
		age.Round(time.Second), auth.DefaultWindow, len(targets), now)
}

// firstSigned reads a pcap file (Ethernet, as tcpdump writes a bridge's)
// and returns the UDP payload of the first version-1 packet of type ty
// from src that carries an auth trailer, and its source.
func firstSigned(file string, ty tsp.Type, src netip.Addr) ([]byte, netip.AddrPort, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, netip.AddrPort{}, err
	}
	if len(b) < 24 {
		return nil, netip.AddrPort{}, fmt.Errorf("%s: %d bytes, no pcap header", file, len(b))
	}
	var order binary.ByteOrder
	switch binary.LittleEndian.Uint32(b) {
	case 0xa1b2c3d4, 0xa1b23c4d:
		order = binary.LittleEndian
	case 0xd4c3b2a1, 0x4d3cb2a1:
		order = binary.BigEndian
	default:
		return nil, netip.AddrPort{}, fmt.Errorf("%s: not a pcap file", file)
	}
	if link := order.Uint32(b[20:]); link != 1 {
		return nil, netip.AddrPort{}, fmt.Errorf("%s: link type %d, want Ethernet (1)", file, link)
	}
	for rec := b[24:]; len(rec) >= 16; {
		n := int(order.Uint32(rec[8:]))
		if len(rec) < 16+n {
			break
		}
		frame := rec[16 : 16+n]
		rec = rec[16+n:]
		if len(frame) < 14+20 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 {
			continue
		}
		ip := frame[14:]
		ihl := int(ip[0]&0x0f) * 4
		if ip[9] != 17 || ihl < 20 || len(ip) < ihl+8 {
			continue
		}
		a, _ := netip.AddrFromSlice(ip[12:16])
		u := ip[ihl:]
		ulen := int(binary.BigEndian.Uint16(u[4:]))
		if a != src || ulen < 8 || ulen > len(u) {
			continue
		}
		payload := u[8:ulen]
		if len(payload) < 2 || payload[1] != tsp.Version || tsp.Type(payload[0]) != ty {
			continue
		}
		if _, tr, err := auth.Split(payload); err == nil && len(tr) > 0 {
			return append([]byte(nil), payload...), netip.AddrPortFrom(a, binary.BigEndian.Uint16(u)), nil
		}
	}
	return nil, netip.AddrPort{}, fmt.Errorf("%s: no signed %v from %v", file, ty, src)
}
