package main

import (
	"bytes"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/tsp"
)

// fakeDaemon answers like a BSD master: ACK with its own name to MSITE,
// ACK echoing seq to TRACEON/TRACEOFF, nothing to TEST; and like ours to a
// ring ELECT, with a result. Every TSP packet it receives is reported on
// the returned channel.
func fakeDaemon(t *testing.T) (string, <-chan tsp.Packet) {
	t.Helper()
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	got := make(chan tsp.Packet, 16)
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := conn.ReadFromUDP(buf)
			if err != nil {
				return
			}
			if tsp.IsExt(buf[:n]) {
				if b := ringResult(buf[:n]); b != nil {
					_, _ = conn.WriteToUDP(b, from)
				}
				continue
			}
			p, err := tsp.Unmarshal(buf[:n])
			if err != nil {
				continue
			}
			got <- p
			reply := tsp.Packet{Type: tsp.Ack, Version: tsp.Version, Seq: p.Seq, Name: "fakemaster"}
			switch p.Type {
			case tsp.MSite, tsp.TraceOn, tsp.TraceOff:
				b, _ := reply.Marshal()
				_, _ = conn.WriteToUDP(b, from)
			}
		}
	}()
	return conn.LocalAddr().String(), got
}

// ringResult is a coordinator's answer to a ring ELECT: a leader among
// three, or nil for any other packet.
func ringResult(d []byte) []byte {
	e, err := tsp.UnmarshalExt(d)
	if err != nil || e.Kind != tsp.ExtRingCtl {
		return nil
	}
	var req live.Ctl
	if json.Unmarshal(e.Payload, &req) != nil || req.Op != live.OpElect {
		return nil
	}
	res := &live.Result{Algorithm: req.Algorithm, N: 3, Leader: "fakemaster", LeaderID: 3, Messages: 6, Bits: 48, Seconds: 0.01, Bound: 9}
	payload, _ := json.Marshal(live.Ctl{Op: live.OpResult, Result: res})
	reply := tsp.ExtPacket{Kind: tsp.ExtRingCtl, Seq: e.Seq, Name: "fakemaster", Payload: payload}
	b, _ := reply.Marshal()
	return b
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	opts := &options{out: &out, port: 525}
	root := newRoot(opts)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestMsite(t *testing.T) {
	addr, got := fakeDaemon(t)
	out, err := run(t, "msite", addr)
	if err != nil {
		t.Fatal(err)
	}
	if want := "master timedaemon at " + addr + " is fakemaster\n"; out != want {
		t.Fatalf("output %q, want %q", out, want)
	}
	if p := <-got; p.Type != tsp.MSite || p.Version != 1 || p.Name == "" {
		t.Fatalf("sent %+v, want MSITE v1 with our name", p)
	}
	out, err = run(t, "--json", "msite", addr)
	if err != nil {
		t.Fatal(err)
	}
	var res []map[string]any
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res) != 1 || res[0]["master"] != "fakemaster" {
		t.Fatalf("json %q: %v", out, err)
	}
}

func TestTraceAndElection(t *testing.T) {
	addr, got := fakeDaemon(t)
	out, err := run(t, "trace", "on", addr)
	if err != nil || out != "timed tracing enabled\n" {
		t.Fatalf("trace on: %q, %v", out, err)
	}
	if p := <-got; p.Type != tsp.TraceOn {
		t.Fatalf("sent %v, want TRACEON", p.Type)
	}
	if _, err := run(t, "trace", "sideways", addr); err == nil || !strings.Contains(err.Error(), "on or off") {
		t.Fatalf("bad trace arg: %v", err)
	}
	out, err = run(t, "election", addr)
	if err != nil || !strings.Contains(out, "election requested at "+addr) {
		t.Fatalf("election: %q, %v", out, err)
	}
	if p := <-got; p.Type != tsp.Test {
		t.Fatalf("sent %v, want TEST", p.Type)
	}
}

func TestNoAnswerIsOneLineError(t *testing.T) {
	silent, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	out, err := run(t, "--timeout", "50ms", "msite", silent.LocalAddr().String())
	if err == nil || strings.Contains(err.Error(), "\n") || !strings.Contains(err.Error(), "no answer") {
		t.Fatalf("err = %v, want one line saying no answer", err)
	}
	if out != "" {
		t.Fatalf("stdout %q, want nothing for a failed host", out)
	}
}

func TestPromptKeepsFlagsAndAbbreviations(t *testing.T) {
	addr, _ := fakeDaemon(t)
	var out bytes.Buffer
	opts := &options{out: &out, port: 525, json: true}
	err := interactive(opts, strings.NewReader("ms "+addr+"\nnosuch\nquit\n"))
	if err == nil {
		t.Fatal("a failed line must make the session fail")
	}
	if !strings.Contains(out.String(), `"master": "fakemaster"`) {
		t.Fatalf("abbreviated msite with --json from the command line: %q", out.String())
	}
	if !strings.Contains(out.String(), `? unknown command "nosuch"`) {
		t.Fatalf("unknown command not reported: %q", out.String())
	}
}
