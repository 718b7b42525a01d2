// Command tsp-attack is the attacker of the end-to-end suite (tests/e2e).
// In a container of its own on a scenario's compose network it forges,
// storms, floods and replays TSP at the daemons there, and prints what it
// did as one JSON object on stdout. It is a test tool: make e2e builds it
// into bin/, the suite bind-mounts it into the attacker's container, and
// it is never part of the product image.
//
//	tsp-attack idle
//	    the container's main process: waits until SIGTERM or SIGINT
//	tsp-attack forge -to A:P[,A:P…] -type T -name N [-from-port P | -spoof A:P]
//	                 [-seq S] [-delta D] [-at D] [-count N] [-pps R]
//	    sends -count packets of type T under name N (the time field: a
//	    correction of D for ADJTIME, now+D for SETTIME, SETDATE and
//	    SETDATEREQ), from port P (0: any) or, with -spoof, in a raw IP
//	    datagram carrying another host's source address (needs NET_RAW)
//	tsp-attack storm -to A:P[,A:P…] -name N -pps R -for D [-type QUIT]
//	    forge at R packets a second for D, QUIT unless told otherwise
//	tsp-attack flood -to A:P -pps R -for D -names N[,N…] [-max N] [-seed S]
//	    R datagrams a second for D (at most -max) from two ports: one
//	    sends random bytes and mutated TSP, the other well-formed TSP of
//	    the types the daemons refuse from strangers (refusedTypes), under
//	    the names given
//	tsp-attack replay -from IP -type T -to A:P [-listen-port 525] [-timeout D]
//	    waits for a datagram of type T from IP (a broadcast reaches every
//	    host on the bridge), then for the next one from the same source, so
//	    that every receiver has accepted a later one, and sends the first,
//	    byte for byte (an auth trailer included), to A:P
//	tsp-attack resend -hex H -to A:P[,A:P…] [-spoof A:P]
//	    sends the datagram H (hex: one recorded elsewhere, e.g. a unicast
//	    correction seen on the bridge, which the attacker's port does not
//	    see) byte for byte to each destination, from any port or, with
//	    -spoof, from another host's address and port
package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/timed-project/timed/tsp"
)

// result is what a subcommand prints.
type result struct {
	Sent       uint64            `json:"sent"`
	SendErrors uint64            `json:"send_errors"`
	Kinds      map[string]uint64 `json:"kinds,omitempty"` // flood: datagrams by kind
	Seconds    float64           `json:"seconds"`
	Captured   *captured         `json:"captured,omitempty"`
	LastError  string            `json:"last_error,omitempty"`
}

// captured describes the datagram replay sent again.
type captured struct {
	Type    string  `json:"type"`
	Seq     uint16  `json:"seq"`
	Name    string  `json:"name"`
	From    string  `json:"from"`
	Bytes   int     `json:"bytes"`
	Signed  bool    `json:"signed"`   // longer than a TSP packet: an auth trailer follows
	NextSeq uint16  `json:"next_seq"` // the later datagram seen before the replay
	Waited  float64 `json:"waited_seconds"`
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var (
		res *result
		err error
	)
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "idle":
		idle()
		return
	case "forge":
		res, err = forge(args, "forge", "", 0)
	case "storm":
		res, err = forge(args, "storm", "QUIT", 10)
	case "flood":
		res, err = flood(args)
	case "replay":
		res, err = replay(args)
	case "resend":
		res, err = resend(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tsp-attack:", err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: tsp-attack idle | forge | storm | flood | replay | resend [flags] (see -h of each)")
	os.Exit(2)
}

// idle keeps the container up; docker exec runs the attacks beside it.
func idle() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	<-ch
}

// addrList parses "A:P,A:P".
func addrList(s string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		a, err := netip.ParseAddrPort(f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, errors.New("-to: no address")
	}
	return out, nil
}

// sender writes one datagram to an address.
type sender interface {
	send(b []byte, to netip.AddrPort) error
	close() error
}

// udpSender is an ordinary UDP socket (Go sets SO_BROADCAST on it).
type udpSender struct{ conn *net.UDPConn }

func newUDPSender(port int) (*udpSender, error) {
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
	if err != nil {
		return nil, err
	}
	return &udpSender{conn}, nil
}

func (u *udpSender) send(b []byte, to netip.AddrPort) error {
	_, err := u.conn.WriteToUDPAddrPort(b, to)
	return err
}

func (u *udpSender) close() error { return u.conn.Close() }

// newSender is a raw sender writing spoof as the source when it is set,
// else a UDP socket on fromPort (0: any).
func newSender(spoof string, fromPort int) (sender, error) {
	if spoof == "" {
		return newUDPSender(fromPort)
	}
	src, err := netip.ParseAddrPort(spoof)
	if err != nil {
		return nil, fmt.Errorf("-spoof: %w", err)
	}
	return newSpoofSender(src)
}

// resend sends one recorded datagram, byte for byte, to each destination.
func resend(args []string) (*result, error) {
	fs := flag.NewFlagSet("resend", flag.ExitOnError)
	raw := fs.String("hex", "", "the datagram, in hex")
	to := fs.String("to", "", "destinations, A:P[,A:P…]")
	spoof := fs.String("spoof", "", "source A:P written into a raw IP header (needs NET_RAW)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	b, err := hex.DecodeString(*raw)
	if err != nil || len(b) == 0 {
		return nil, fmt.Errorf("-hex: %d bytes, %v", len(b), err)
	}
	dests, err := addrList(*to)
	if err != nil {
		return nil, err
	}
	s, err := newSender(*spoof, 0)
	if err != nil {
		return nil, err
	}
	defer s.close()
	start := time.Now()
	res := &result{}
	for _, d := range dests {
		res.count(s.send(b, d))
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// pace calls send(i) for i < total at pps a second (all at once when pps
// is 0), and stops at total or after limit, whichever comes first. It
// sleeps only when at least a millisecond ahead, so at high rates it
// sends in bursts of a millisecond's worth.
func pace(total int, pps float64, limit time.Duration, send func(i int)) time.Duration {
	start := time.Now()
	for i := range total {
		if pps > 0 {
			due := start.Add(time.Duration(float64(i) / pps * float64(time.Second)))
			if d := time.Until(due); d >= time.Millisecond {
				time.Sleep(d)
			}
		}
		if time.Since(start) > limit {
			break
		}
		send(i)
	}
	return time.Since(start)
}

func (r *result) count(err error) {
	if err != nil {
		r.SendErrors++
		r.LastError = err.Error()
		return
	}
	r.Sent++
}

// forge: -count packets (or -pps for -for) of one type under one name.
func forge(args []string, name, defType string, defPPS float64) (*result, error) {
	fs := flag.NewFlagSet(name, flag.ExitOnError)
	to := fs.String("to", "", "destinations, A:P[,A:P…]")
	typ := fs.String("type", defType, "TSP type (BSD's name: ADJTIME, QUIT, …)")
	pname := fs.String("name", "", "name in the packet (any bytes but NUL)")
	fromPort := fs.Int("from-port", 0, "source port (0: any; below 1024 needs NET_BIND_SERVICE)")
	spoof := fs.String("spoof", "", "source A:P written into a raw IP header (needs NET_RAW)")
	seq := fs.Uint("seq", 1, "sequence number of the first packet (then +1 each)")
	delta := fs.Duration("delta", 0, "ADJTIME: the correction carried")
	at := fs.Duration("at", 0, "SETTIME, SETDATE, SETDATEREQ: the time carried, as now + at")
	count := fs.Int("count", 1, "packets to each destination (with -for: at most)")
	pps := fs.Float64("pps", defPPS, "rounds a second (one packet to each destination a round); 0: at once")
	dur := fs.Duration("for", 0, "with -pps: how long (sets -count to pps·for)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	dests, err := addrList(*to)
	if err != nil {
		return nil, err
	}
	ty, ok := tsp.ParseType(*typ)
	if !ok {
		return nil, fmt.Errorf("-type %q: not a TSP type", *typ)
	}
	n := *count
	if *dur > 0 && *pps > 0 {
		n = int(*pps * dur.Seconds())
	}
	limit := *dur + time.Second
	if *dur == 0 {
		limit = time.Duration(n)*time.Second + time.Minute
	}
	s, err := newSender(*spoof, *fromPort)
	if err != nil {
		return nil, err
	}
	defer s.close()

	res := &result{}
	var buildErr error
	took := pace(n, *pps, limit, func(i int) {
		p := tsp.Packet{Type: ty, Version: tsp.Version, Seq: uint16(*seq) + uint16(i), Name: *pname}
		switch {
		case ty == tsp.AdjTime:
			p.Time, buildErr = tsp.DurationTimeval(*delta)
		case ty.CarriesTime():
			p.Time, buildErr = tsp.TimeTimeval(time.Now().Add(*at))
		}
		b, err := p.Marshal()
		if buildErr = errors.Join(buildErr, err); buildErr != nil {
			return
		}
		for _, d := range dests {
			res.count(s.send(b, d))
		}
	})
	if buildErr != nil {
		return nil, buildErr
	}
	res.Seconds = took.Seconds()
	return res, nil
}

// refusedTypes are the types a flood sends well formed (and mutates):
// each is one the daemons take only from their master, a known master or
// their own host, so that what passes the rate limit is refused, not
// obeyed. The others (ELECTION, CONFLICT, MASTERUP, …) any host may send
// on a network without -F or auth, and BSD answers them: a flood of them
// tests the protocol, not the flood defences.
var refusedTypes = []tsp.Type{tsp.Quit, tsp.TraceOn, tsp.Test, tsp.SetDate, tsp.AdjTime, tsp.SetTime}

// flood sends pps datagrams a second for a while from two sockets.
func flood(args []string) (*result, error) {
	fs := flag.NewFlagSet("flood", flag.ExitOnError)
	to := fs.String("to", "", "destination A:P")
	pps := fs.Float64("pps", 10000, "datagrams a second, both sockets together")
	dur := fs.Duration("for", 10*time.Second, "how long")
	maxN := fs.Int("max", 200000, "at most this many datagrams")
	names := fs.String("names", "", "names for the well-formed packets, N[,N…]")
	seed := fs.Uint64("seed", 1, "random seed (the flood is reproducible)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	dest, err := netip.ParseAddrPort(*to)
	if err != nil {
		return nil, fmt.Errorf("-to: %w", err)
	}
	if *pps <= 0 || *dur <= 0 {
		return nil, errors.New("-pps and -for must be positive")
	}
	nameList := strings.Split(*names, ",")
	noise, err := newUDPSender(0)
	if err != nil {
		return nil, err
	}
	defer noise.close()
	wellFormed, err := newUDPSender(0)
	if err != nil {
		return nil, err
	}
	defer wellFormed.close()

	rng := rand.New(rand.NewPCG(*seed, 0x7453507))
	res := &result{Kinds: map[string]uint64{}}
	buf := make([]byte, 0, 1024)
	n := min(*maxN, int(*pps*dur.Seconds()))
	took := pace(n, *pps, *dur+time.Second, func(i int) {
		var s sender = noise
		kind := [3]string{"random bytes", "mutated TSP", "well-formed TSP"}[i%3]
		switch i % 3 {
		case 0: // any length, any bytes
			buf = buf[:1+rng.IntN(600)]
			for j := range buf {
				buf[j] = byte(rng.Uint32())
			}
		case 1: // a well-formed packet with a few bytes flipped, never its type
			p := tsp.Packet{Type: refusedTypes[rng.IntN(len(refusedTypes))], Version: tsp.Version, Seq: uint16(rng.Uint32()),
				Name: nameList[rng.IntN(len(nameList))]}
			buf, _ = p.AppendMarshal(buf[:0])
			for range 1 + rng.IntN(8) {
				buf[1+rng.IntN(len(buf)-1)] ^= byte(1 + rng.IntN(255))
			}
		default:
			s = wellFormed
			p := tsp.Packet{Type: refusedTypes[rng.IntN(len(refusedTypes))], Version: tsp.Version, Seq: uint16(rng.Uint32()),
				Name: nameList[rng.IntN(len(nameList))]}
			if p.Type.CarriesTime() {
				p.Time = tsp.Timeval{Sec: int32(rng.Uint32()), Usec: int32(rng.IntN(1_000_000))}
			}
			buf, _ = p.AppendMarshal(buf[:0])
		}
		err := s.send(buf, dest)
		res.count(err)
		if err == nil {
			res.Kinds[kind]++
		}
	})
	res.Seconds = took.Seconds()
	return res, nil
}

// replay captures a datagram and sends it again once a later one from
// the same source has been seen.
func replay(args []string) (*result, error) {
	fs := flag.NewFlagSet("replay", flag.ExitOnError)
	from := fs.String("from", "", "source address to capture from")
	typ := fs.String("type", "LOOP", "TSP type to capture")
	to := fs.String("to", "", "where to replay it, A:P (a broadcast address reaches every host)")
	port := fs.Int("listen-port", 525, "port to listen on (broadcasts to the daemons' port reach it)")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	src, err := netip.ParseAddr(*from)
	if err != nil {
		return nil, fmt.Errorf("-from: %w", err)
	}
	dest, err := netip.ParseAddrPort(*to)
	if err != nil {
		return nil, fmt.Errorf("-to: %w", err)
	}
	ty, ok := tsp.ParseType(*typ)
	if !ok {
		return nil, fmt.Errorf("-type %q: not a TSP type", *typ)
	}
	u, err := newUDPSender(*port)
	if err != nil {
		return nil, err
	}
	defer u.close()
	start := time.Now()
	if err := u.conn.SetReadDeadline(start.Add(*timeout)); err != nil {
		return nil, err
	}
	var first []byte
	var got captured
	buf := make([]byte, 2048)
	for {
		n, a, err := u.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return nil, fmt.Errorf("no %v from %v, then another, within %v: %w", ty, src, *timeout, err)
		}
		if a.Addr().Unmap() != src {
			continue
		}
		p, err := tsp.Unmarshal(buf[:n])
		if err != nil || p.Type != ty {
			continue
		}
		if first == nil {
			first = append([]byte(nil), buf[:n]...)
			got = captured{Type: p.Type.String(), Seq: p.Seq, Name: p.Name, From: a.String(), Bytes: n, Signed: n > tsp.PacketSize}
			continue
		}
		got.NextSeq, got.Waited = p.Seq, time.Since(start).Seconds()
		break
	}
	res := &result{Captured: &got}
	res.count(u.send(first, dest))
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
