package udp

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/timed-project/timed/tsp"
)

// slaveUpBurst has n UDP senders on loopback send one SLAVEUP each to a
// transport whose reader is held on the first datagram, so that all the
// others wait in the kernel's receive buffer: the worst case of a start-up
// (every answer at once, the daemon busy). It reads the socket's drops
// from /proc/net/udp, releases the reader and returns once it has read
// every SLAVEUP the kernel kept, and then one more datagram, whose
// SO_RXQ_OVFL count (taken when it was queued, after the burst) is then in
// the transport's Stats.
func slaveUpBurst(t *testing.T, n, receiveBuffer int) (tr *Transport, kernelDrops uint64) {
	t.Helper()
	release := make(chan struct{})
	done := make(chan struct{}, n+1)
	var once sync.Once
	hook := func() {
		once.Do(func() { <-release })
		done <- struct{}{}
	}
	tr = listen(t, Config{Hostname: "master", ReceiveBuffer: receiveBuffer, onDatagram: hook})
	send := func(i int) {
		c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(localhost, 0)))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b, err := (&tsp.Packet{Type: tsp.SlaveUp, Version: tsp.Version, Name: fmt.Sprintf("slave%03d", i)}).Marshal()
		if err == nil {
			_, err = c.WriteToUDPAddrPort(b, addr(tr))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	func() {
		defer close(release) // on a failure too: the reader must not stay held
		for i := range n {
			send(i)
		}
		kernelDrops = socketDrops(t, tr.LocalAddr().Port())
	}()
	awaitN(t, done, n-int(kernelDrops), "the SLAVEUPs kept")
	send(n)
	awaitN(t, done, 1, "the SLAVEUP after the burst")
	return tr, kernelDrops
}

// socketDrops is the drops column of the IPv4 UDP socket bound to port in
// /proc/net/udp: this socket's receive-buffer drops, whatever other
// sockets on a shared machine lose.
func socketDrops(t *testing.T, port uint16) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 13 || !strings.HasSuffix(f[1], want) {
			continue
		}
		d, err := strconv.ParseUint(f[len(f)-1], 10, 64)
		if err != nil {
			t.Fatalf("/proc/net/udp: %q: %v", line, err)
		}
		return d
	}
	t.Fatalf("/proc/net/udp: no socket on port %d", port)
	return 0
}

// TestStartupBurstNoDrops is the 500-slave start-up: 500 SLAVEUPs
// reach the master while its reader is busy, and none is lost to the
// receive buffer (the issue lost 16 to UdpRcvbufErrors). The count is the
// socket's own (SO_RXQ_OVFL), not the host's, so other sockets' drops on
// a shared machine cannot fail it.
func TestStartupBurstNoDrops(t *testing.T) {
	const n = 500
	tr, drops := slaveUpBurst(t, n, 0)
	st := tr.Stats()
	if drops != 0 || st.KernelDrops != 0 || st.Received[tsp.SlaveUp] != n+1 {
		t.Fatalf("%d SLAVEUPs delivered of %d, %d dropped by the kernel (SO_RXQ_OVFL: %d), transport drops %v; receive buffer granted %d bytes (SO_RCVBUFFORCE needs root or CAP_NET_ADMIN; without, net.core.rmem_max caps it)",
			st.Received[tsp.SlaveUp], n+1, drops, st.KernelDrops, st.Dropped, tr.ReceiveBuffer())
	}
	if tr.ReceiveBuffer() < DefaultReceiveBuffer {
		t.Errorf("receive buffer granted %d bytes, asked %d", tr.ReceiveBuffer(), DefaultReceiveBuffer)
	}
}

// TestKernelDropsCounted: with a receive buffer too small for the burst
// (16 KiB: a few dozen datagrams), the burst loses datagrams, and
// Stats.KernelDrops counts exactly the socket's drops; the test above
// would see them.
func TestKernelDropsCounted(t *testing.T) {
	const n = 200
	tr, drops := slaveUpBurst(t, n, 16<<10)
	st := tr.Stats()
	if drops == 0 {
		t.Fatalf("no drops: %d of %d delivered into a %d-byte buffer", st.Received[tsp.SlaveUp], n, tr.ReceiveBuffer())
	}
	if st.KernelDrops != drops || st.Received[tsp.SlaveUp]+drops != n+1 {
		t.Fatalf("%d delivered of %d; SO_RXQ_OVFL %d, the socket's drops %d", st.Received[tsp.SlaveUp], n+1, st.KernelDrops, drops)
	}
}

func TestRxqOverflowGarbage(t *testing.T) {
	if _, ok := rxqOverflow([]byte{1, 2, 3}); ok {
		t.Error("found a drop count in garbage")
	}
	if _, ok := rxqOverflow(nil); ok {
		t.Error("found a drop count in no control messages")
	}
}
