package auth

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const saveEvery = 30 * time.Second // what the tests configure as SaveInterval

func stateConfig(t *testing.T, kr *Keyring, dir string) Config {
	t.Helper()
	return Config{Mode: Required, Keys: kr, StateDir: dir, SaveInterval: saveEvery}
}

// TestReplayAcrossCrash: the receiver saves its table, accepts more, and
// crashes before the next save. After the restart every datagram it had
// accepted is a replay, the last ones too; the sender's fresh datagrams
// pass once its counter is past the saved ceiling (the margin: at most
// four save intervals after the last datagram saved).
func TestReplayAcrossCrash(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	dirB := t.TempDir()
	s := newSigner(t, stateConfig(t, kr, t.TempDir()), t0)
	v := newVerifier(t, stateConfig(t, kr, dirB))
	p := tspPacket(slaveUp, 1, "tsa")

	saved := sign(t, s, p, t0.Add(time.Second))
	expect(t, v, hostA, saved, t0.Add(time.Second), Valid, ReasonNone)
	if err := v.Save(); err != nil { // the periodic save
		t.Fatal(err)
	}
	var unsaved [][]byte // accepted after the save, before the crash
	for i := 2; i <= 29; i++ {
		d := sign(t, s, p, t0.Add(time.Duration(i)*time.Second))
		expect(t, v, hostA, d, t0.Add(time.Duration(i)*time.Second), Valid, ReasonNone)
		unsaved = append(unsaved, d)
	}
	// Crash: v is dropped without Close.
	fi, err := os.Stat(filepath.Join(dirB, ReplayStateFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("replay state: %v, %v; want mode 0600", fi, err)
	}

	v2 := newVerifier(t, stateConfig(t, kr, dirB))
	now := t0.Add(40 * time.Second)
	expect(t, v2, hostA, saved, now, Bad, ReasonReplay)
	for _, d := range unsaved {
		expect(t, v2, hostA, d, now, Bad, ReasonReplay)
	}
	// The ceiling saved is the saved counter plus 4×30 s: the sender's
	// datagrams up to then are refused, as replays would be.
	margin := 4 * saveEvery
	expect(t, v2, hostA, sign(t, s, p, t0.Add(time.Second+margin)), now, Bad, ReasonReplay)
	fresh := sign(t, s, p, t0.Add(time.Second+margin+time.Nanosecond))
	expect(t, v2, hostA, fresh, now, Valid, ReasonNone)
	expect(t, v2, hostA, fresh, now, Bad, ReasonReplay)
}

// TestCleanRestart: Close saves exact counters, so after a clean stop a
// sender's next datagram passes at once and its last one does not.
func TestCleanRestart(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	dirA, dirB := t.TempDir(), t.TempDir()
	s := newSigner(t, stateConfig(t, kr, dirA), t0)
	v := newVerifier(t, stateConfig(t, kr, dirB))
	p := tspPacket(slaveUp, 1, "tsa")
	last := sign(t, s, p, t0.Add(time.Second))
	expect(t, v, hostA, last, t0, Valid, ReasonNone)
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	expect(t, v, hostA, sign(t, s, p, t0.Add(2*time.Second)), t0, Bad, ReasonClosed)

	v2 := newVerifier(t, stateConfig(t, kr, dirB))
	expect(t, v2, hostA, last, t0, Bad, ReasonReplay)
	expect(t, v2, hostA, sign(t, s, p, t0.Add(3*time.Second)), t0, Valid, ReasonNone)

	// The sender stops cleanly too and starts again: same identity, the
	// counter right after the last one used, accepted at once.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Sign(p, t0); !errors.Is(err, ErrClosed) {
		t.Errorf("Sign after Close: %v", err)
	}
	s2 := newSigner(t, stateConfig(t, kr, dirA), t0.Add(time.Hour))
	if s2.Sender() != s.Sender() {
		t.Fatalf("sender identity %016x after restart, was %016x", s2.Sender(), s.Sender())
	}
	d := sign(t, s2, p, t0.Add(time.Hour))
	if got, want := counterOf(d), s.last+1; got != want {
		t.Errorf("first counter after a clean restart %d, want %d", got, want)
	}
	expect(t, v2, hostA, d, t0, Valid, ReasonNone)
}

// TestSenderCrash: a sender that crashes starts again above every counter
// it may have used (its reservation), so receivers that know it accept it
// at once, whatever its clock now says.
func TestSenderCrash(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	dirA := t.TempDir()
	s := newSigner(t, stateConfig(t, kr, dirA), t0)
	v := newVerifier(t, stateConfig(t, kr, ""))
	p := tspPacket(slaveUp, 1, "tsa")
	expect(t, v, hostA, sign(t, s, p, t0), t0, Valid, ReasonNone)
	if err := s.Save(); err != nil {
		t.Fatal(err)
	}
	// Up to two save intervals after the save, no new save is needed…
	late := sign(t, s, p, t0.Add(saveEvery))
	select {
	case <-s.SaveWanted():
		t.Fatal("save wanted half way")
	default:
	}
	expect(t, v, hostA, late, t0, Valid, ReasonNone)
	// …past the half of the reservation, a save is asked for.
	expect(t, v, hostA, sign(t, s, p, t0.Add(saveEvery+time.Second)), t0, Valid, ReasonNone)
	select {
	case <-s.SaveWanted():
	default:
		t.Fatal("no save wanted near the end of the reservation")
	}
	// Crash before that save. The restarted sender's clock was stepped
	// back a day; its counter starts above the reservation anyway.
	s2 := newSigner(t, stateConfig(t, kr, dirA), t0.Add(-24*time.Hour))
	if s2.Sender() != s.Sender() {
		t.Fatal("new identity after a crash")
	}
	d := sign(t, s2, p, t0.Add(-24*time.Hour))
	if c := counterOf(d); c <= s.last {
		t.Fatalf("counter %d after a crash, %d was used", c, s.last)
	}
	expect(t, v, hostA, d, t0, Valid, ReasonNone)
}

// TestCeilingNotSaved: a counter past the saved ceiling waits for a save,
// which is asked for; the same datagram then passes (it was never
// accepted, so this is no replay).
func TestCeilingNotSaved(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	s := newSigner(t, Config{Mode: Required, Keys: kr}, t0)
	v := newVerifier(t, stateConfig(t, kr, t.TempDir()))
	p := tspPacket(slaveUp, 1, "tsa")
	drain := func() bool {
		select {
		case <-v.SaveWanted():
			return true
		default:
			return false
		}
	}
	drain()
	expect(t, v, hostA, sign(t, s, p, t0), t0, Valid, ReasonNone)
	if !drain() {
		t.Error("a new sender does not ask for a save")
	}
	// Not saved yet: the new entry has no ceiling.
	expect(t, v, hostA, sign(t, s, p, t0.Add(time.Hour)), t0, Valid, ReasonNone)
	if err := v.Save(); err != nil {
		t.Fatal(err)
	}
	// Within the first half of the lookahead: no save asked for.
	expect(t, v, hostA, sign(t, s, p, t0.Add(time.Hour+2*saveEvery-time.Second)), t0, Valid, ReasonNone)
	if drain() {
		t.Error("save asked for with most of the lookahead left")
	}
	expect(t, v, hostA, sign(t, s, p, t0.Add(time.Hour+2*saveEvery+time.Second)), t0, Valid, ReasonNone)
	if !drain() {
		t.Error("no save asked for half way to the ceiling")
	}
	// The sender jumps a day ahead (a restart with a clock far ahead).
	jump := sign(t, s, p, t0.Add(25*time.Hour))
	expect(t, v, hostA, jump, t0, Bad, ReasonNotSaved)
	if !drain() {
		t.Error("ErrNotSaved does not ask for a save")
	}
	if err := v.Save(); err != nil {
		t.Fatal(err)
	}
	expect(t, v, hostA, jump, t0, Valid, ReasonNone)
	expect(t, v, hostA, sign(t, s, p, t0.Add(25*time.Hour+time.Second)), t0, Valid, ReasonNone)
}

// TestEvictedBeforeSave: an evicted sender is still in the file until the
// next save, so what its new entry accepts stays under the ceiling there;
// after a crash, nothing accepted then passes again.
func TestEvictedBeforeSave(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	cfg := stateConfig(t, kr, t.TempDir())
	cfg.MaxSenders = 1
	x, y := newSigner(t, Config{Mode: Required, Keys: kr}, t0), newSigner(t, Config{Mode: Required, Keys: kr}, t0)
	v := newVerifier(t, cfg)
	p := tspPacket(slaveUp, 1, "tsa")
	x1 := sign(t, x, p, t0)
	expect(t, v, hostA, x1, t0, Valid, ReasonNone)
	if err := v.Save(); err != nil { // the file: x, ceiling x1 + 4 intervals
		t.Fatal(err)
	}
	expect(t, v, hostA, sign(t, y, p, t0), t0, Valid, ReasonNone) // evicts x
	x2 := sign(t, x, p, t0.Add(4*saveEvery))                      // at the saved ceiling
	x3 := sign(t, x, p, t0.Add(4*saveEvery+time.Second))
	// Evicted since the last save, with a counter past its saved ceiling:
	// wait for the save.
	expect(t, v, hostA, x3, t0, Bad, ReasonNotSaved)
	// A first contact again: x1 passes (what eviction costs), and x is
	// held to the ceiling in the file.
	expect(t, v, hostA, x1, t0, Valid, ReasonNone)
	expect(t, v, hostA, x2, t0, Valid, ReasonNone)
	expect(t, v, hostA, x3, t0, Bad, ReasonNotSaved)

	v2 := newVerifier(t, cfg) // crash
	expect(t, v2, hostA, x1, t0, Bad, ReasonReplay)
	expect(t, v2, hostA, x2, t0, Bad, ReasonReplay)
	expect(t, v2, hostA, x3, t0, Valid, ReasonNone)
}

// TestNoStateDir shows what is not protected without a state directory:
// a restarted receiver has forgotten every sender, so a datagram it had
// accepted passes again as a first contact, as long as it is within the
// window; and a restarted sender is a new sender.
func TestNoStateDir(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	cfg := Config{Mode: Required, Keys: kr, Window: time.Minute}
	s := newSigner(t, cfg, t0)
	p := tspPacket(slaveUp, 1, "tsa")
	d := sign(t, s, p, t0)
	expect(t, newVerifier(t, cfg), hostA, d, t0, Valid, ReasonNone)
	v2 := newVerifier(t, cfg) // restarted
	expect(t, v2, hostA, d, t0.Add(time.Minute), Valid, ReasonNone)
	expect(t, newVerifier(t, cfg), hostA, d, t0.Add(time.Minute+1), Bad, ReasonWindow)
	if newSigner(t, cfg, t0).Sender() == s.Sender() {
		t.Error("two stateless signers share an identity")
	}
}

func TestStateFiles(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA256))
	write := func(t *testing.T, name, content string, mode os.FileMode) string {
		dir := t.TempDir()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	for _, tc := range []struct {
		name, file, content string
		mode                os.FileMode
		want                string
	}{
		{"replay: group-writable", ReplayStateFile, replayHeader + "\n", 0o620, "writable by group or others: run chmod 600"},
		{"replay: other header", ReplayStateFile, "timed-auth-replay 2\n", 0o600, ":1: not a state file of this version"},
		{"replay: empty", ReplayStateFile, "", 0o600, ":1: not a state file"},
		{"replay: bad line", ReplayStateFile, replayHeader + "\n# c\n0123456789abcdef 5\n0123 5\n", 0o600, ":4: want"},
		{"replay: zero ceiling", ReplayStateFile, replayHeader + "\n0123456789abcdef 0\n", 0o600, ":2: want"},
		{"sender: other-writable", SenderStateFile, senderHeader + "\n", 0o602, "chmod 600"},
		{"sender: bad id", SenderStateFile, senderHeader + "\nsender 12\nreserved 5\n", 0o600, ":2: sender is not 16 hex digits"},
		{"sender: bad counter", SenderStateFile, senderHeader + "\nsender 0123456789abcdef\nreserved -5\n", 0o600, ":3: reserved is not"},
		{"sender: unknown word", SenderStateFile, senderHeader + "\nfoo bar\n", 0o600, ":2: unknown key word"},
		{"sender: incomplete", SenderStateFile, senderHeader + "\nsender 0123456789abcdef\n", 0o600, "needs both"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := write(t, tc.file, tc.content, tc.mode)
			cfg := stateConfig(t, kr, dir)
			var err error
			if tc.file == ReplayStateFile {
				_, err = NewVerifier(cfg, nil)
			} else {
				_, err = NewSigner(cfg, t0)
			}
			if !errors.Is(err, ErrState) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, tc.file)) {
				t.Fatalf("%v; want ErrState naming the file and saying %q", err, tc.want)
			}
		})
	}
	missing := stateConfig(t, kr, filepath.Join(t.TempDir(), "absent"))
	if _, err := NewVerifier(missing, nil); !errors.Is(err, ErrState) {
		t.Errorf("verifier, state dir absent: %v", err)
	}
	if _, err := NewSigner(missing, t0); !errors.Is(err, ErrState) {
		t.Errorf("signer, state dir absent: %v", err)
	}
	// Lines past MaxSenders: the least recent (first) are dropped.
	var b strings.Builder
	b.WriteString(replayHeader + "\n")
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(&b, "%016x %d\n", i, 1000*i)
	}
	cfg := stateConfig(t, kr, write(t, ReplayStateFile, b.String(), 0o600))
	cfg.MaxSenders = 3
	v := newVerifier(t, cfg)
	for id := uint64(1); id <= 5; id++ {
		if _, kept := v.senders[id]; kept != (id >= 3) {
			t.Errorf("sender %d kept: %v", id, kept)
		}
	}
}

// TestReplayModel drives senders and a receiver through random sends,
// replays, saves, crashes and clean restarts of either side, and clock
// steps, and checks the one promise: a datagram is accepted at most once,
// unless the receiver lost its sender's entry in between (evicted, or
// not yet saved at a crash), so that a first contact, which only the
// window bounds, started the sender's counter afresh. It also checks that
// the senders are heard again in the end.
func TestReplayModel(t *testing.T) {
	kr := keyring(t, testKey(t, 1, SHA1))
	seeds, ops := uint64(8), 1500 // every save syncs a file: about 0.5 s a seed
	if testing.Short() {
		seeds = 2
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 11))
			dirB := t.TempDir()
			cfgB := stateConfig(t, kr, dirB)
			cfgB.Window = NoWindow
			cfgB.MaxSenders = 3
			v := newVerifier(t, cfgB)
			type sender struct {
				cfg   Config
				s     *Signer
				clock time.Duration // its wall clock's error
			}
			senders := make([]*sender, 4)
			for i := range senders {
				cfg := stateConfig(t, kr, t.TempDir())
				senders[i] = &sender{cfg: cfg, s: newSigner(t, cfg, t0)}
			}
			now := t0
			var sent [][]byte
			lost := map[uint64]int{}       // per sender: first contacts so far
			acceptedAt := map[string]int{} // per datagram: lost[sender] when accepted
			check := func(d []byte) {
				t.Helper()
				tr, _, _ := ParseTrailer(d[tspPacketSize:])
				if _, known := v.senders[tr.Sender]; !known {
					lost[tr.Sender]++
				}
				_, res, err := v.Check(hostA, d, now)
				if res == Bad {
					if r := ReasonOf(err); r != ReasonReplay && r != ReasonNotSaved {
						t.Fatalf("unexpected drop: %v", err)
					}
					return
				}
				if at, again := acceptedAt[string(d)]; again && at == lost[tr.Sender] {
					t.Fatalf("datagram of sender %016x counter %d accepted again, the entry kept in between", tr.Sender, tr.Counter)
				}
				acceptedAt[string(d)] = lost[tr.Sender]
			}
			for range ops {
				now = now.Add(time.Duration(rng.Int64N(int64(20 * time.Second))))
				sn := senders[rng.IntN(len(senders))]
				switch op := rng.IntN(100); {
				case op < 50:
					d := sign(t, sn.s, tspPacket(slaveUp, 1, "m"), now.Add(sn.clock))
					sent = append(sent, d)
					check(d)
				case op < 75 && len(sent) > 0:
					check(sent[rng.IntN(len(sent))])
				case op < 83:
					if err := v.Save(); err != nil {
						t.Fatal(err)
					}
				case op < 86: // receiver crash
					v = newVerifier(t, cfgB)
				case op < 88: // receiver clean restart
					if err := v.Close(); err != nil {
						t.Fatal(err)
					}
					v = newVerifier(t, cfgB)
				case op < 93:
					if err := sn.s.Save(); err != nil {
						t.Fatal(err)
					}
				case op < 95: // sender crash
					sn.s = newSigner(t, sn.cfg, now.Add(sn.clock))
				case op < 96: // sender clean restart
					if err := sn.s.Close(); err != nil {
						t.Fatal(err)
					}
					sn.s = newSigner(t, sn.cfg, now.Add(sn.clock))
				default: // the master steps the sender's clock, either way
					sn.clock += time.Duration(rng.Int64N(int64(2*time.Hour))) - time.Hour
				}
			}
			// Liveness: with saves going on, every sender is heard again
			// within the margin.
			for _, sn := range senders {
				if err := sn.s.Save(); err != nil {
					t.Fatal(err)
				}
			}
			heard := map[uint64]bool{}
			for range 20 {
				now = now.Add(15 * time.Second)
				if err := v.Save(); err != nil {
					t.Fatal(err)
				}
				for _, sn := range senders {
					if _, res, _ := v.Check(hostA, sign(t, sn.s, tspPacket(slaveUp, 1, "m"), now.Add(sn.clock)), now); res == Valid {
						heard[sn.s.Sender()] = true
					}
				}
			}
			if len(heard) != len(senders) {
				t.Fatalf("only %d of %d senders heard again", len(heard), len(senders))
			}
		})
	}
}
