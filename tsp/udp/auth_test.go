package udp

import (
	"strings"
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

// authDaemon is a transport with its own signer and the verifier paired
// with it, as the daemon makes them.
func authDaemon(t *testing.T, name string, keys *auth.Keyring) (*Transport, <-chan struct{}) {
	t.Helper()
	cfg := auth.Config{Mode: auth.Required, Keys: keys}
	s, err := auth.NewSigner(cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(cfg, s)
	if err != nil {
		t.Fatal(err)
	}
	hook, done := processed()
	return listen(t, Config{Hostname: name, Signer: s, Verifier: v, onDatagram: hook}), done
}

// TestAuthEchoAndOwnIdentity: under auth, a correction reaches its slave
// only once its master has heard the slave (its trailer then echoes the
// slave's nonce); before that it is counted under "auth no echo of our
// nonce". Our own datagram come back is counted as an own echo, by its
// sender identity, even under another name. Each drop is counted once.
func TestAuthEchoAndOwnIdentity(t *testing.T) {
	keys, err := auth.ParseKeys(strings.NewReader("1 SHA256 HEX:"+strings.Repeat("5a", 32)+"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	master, mDone := authDaemon(t, "master", keys)
	slave, sDone := authDaemon(t, "slave", keys)
	adj := tsp.Packet{Type: tsp.AdjTime, Seq: 1, Time: tsp.Timeval{Usec: 500}}

	if err := master.Send(&adj, addr(slave)); err != nil {
		t.Fatal(err)
	}
	awaitN(t, sDone, 1, "ADJTIME before the master heard the slave")
	// Our own datagram, under another name (the transport's name check
	// would let it through): the identity tells.
	if err := master.Send(&tsp.Packet{Type: tsp.SlaveUp, Name: "not-master"}, addr(master)); err != nil {
		t.Fatal(err)
	}
	awaitN(t, mDone, 1, "own datagram")

	if err := slave.Send(&tsp.Packet{Type: tsp.SlaveUp}, addr(master)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, master); r.Packet == nil || r.Packet.Type != tsp.SlaveUp {
		t.Fatalf("master got %+v, want SLAVEUP", r)
	}
	adj.Seq = 2
	if err := master.Send(&adj, addr(slave)); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, slave); r.Packet == nil || r.Packet.Type != tsp.AdjTime || r.Packet.Seq != 2 {
		t.Fatalf("slave got %+v, want the ADJTIME sent after the master heard it", r)
	}

	want := map[string]uint64{AuthDropPrefix + auth.ReasonNoEcho.String(): 1}
	if got := slave.Stats().DropCounts(); !mapsEqual(got, want) {
		t.Errorf("slave drops %v, want %v", got, want)
	}
	want = map[string]uint64{DropOwnEcho.String(): 1}
	if got := master.Stats().DropCounts(); !mapsEqual(got, want) {
		t.Errorf("master drops %v, want %v", got, want)
	}
}
