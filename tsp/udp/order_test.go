package udp

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/auth"
)

// TestSignedSendsKeepTheirOrder: datagrams sent from many goroutines at
// once reach a receiver that requires signatures in the order of their
// counters: none is dropped as a replay. (Signed first and written second,
// one would be.)
func TestSignedSendsKeepTheirOrder(t *testing.T) {
	keys, err := auth.ParseKeys(strings.NewReader("1 SHA256 HEX:"+strings.Repeat("5a", 32)+"\n"), "test")
	if err != nil {
		t.Fatal(err)
	}
	cfg := auth.Config{Mode: auth.Required, Keys: keys}
	signer, err := auth.NewSigner(cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := auth.NewVerifier(cfg, nil) // the receiver signs nothing: tx is another daemon
	if err != nil {
		t.Fatal(err)
	}
	open := limit.Config{Rate: 1e6, Burst: 1e6, GlobalRate: 1e6, GlobalBurst: 1e6}
	hook, done := processed()
	rx := listen(t, Config{Hostname: "rx", Verifier: verifier, RateLimit: open, QueueLen: 8192, onDatagram: hook})
	tx := listen(t, Config{Hostname: "tx", Signer: signer})
	// In rounds the receiver's socket buffer holds: 8 goroutines at once,
	// 10 datagrams each, then wait for the reader.
	const senders, each, rounds = 8, 10, 25
	for r := range rounds {
		var wg sync.WaitGroup
		for g := range senders {
			wg.Go(func() {
				for i := range each {
					p := tsp.Packet{Type: tsp.Ack, Seq: uint16((r*senders+g)*each + i)}
					if err := tx.Send(&p, addr(rx)); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		awaitN(t, done, senders*each, "signed datagrams")
	}
	st := rx.Stats()
	if n := st.Auth[auth.ReasonReplay]; n > 0 {
		t.Fatalf("%d of %d datagrams dropped as replays: signed in one order, written in another", n, senders*each*rounds)
	}
	if n := st.Received[tsp.Ack]; n != senders*each*rounds {
		t.Fatalf("%d of %d delivered; drops %v", n, senders*each*rounds, st.Dropped)
	}
}
