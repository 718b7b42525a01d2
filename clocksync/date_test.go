package clocksync

import (
	"testing"
	"time"

	"github.com/timed-project/timed/tsp"
)

func TestDecideDate(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	setdate := func(d time.Duration, trusted bool) DateRequest {
		return DateRequest{Type: tsp.SetDate, From: "admin", Time: now.Add(d), Queued: 2 * ms, Trusted: trusted}
	}
	req := func(d time.Duration, known, newSeq bool) DateRequest {
		return DateRequest{Type: tsp.SetDateReq, From: "slave1", Time: now.Add(d), Trusted: true, KnownSlave: known, NewSeq: newSeq}
	}
	cases := []struct {
		name string
		role DateRole
		req  DateRequest
		want DateDecision
	}{
		{"master, small change: slew network-wide, dictate 3", DateMaster, setdate(5*time.Second, true),
			DateDecision{DateAck: true, Target: now.Add(5*time.Second + 2*ms), Slew: 5*time.Second + 2*ms, Dictate: 3}},
		{"master, large change: step and spread, dictate 2", DateMaster, setdate(time.Hour, true),
			DateDecision{DateAck: true, Target: now.Add(time.Hour + 2*ms), Step: true, SpreadTime: true, Dictate: 2}},
		{"master, untrusted: logged, time re-asserted, nothing changed", DateMaster, setdate(time.Hour, false),
			DateDecision{Ignore: true, Reason: "date request from untrusted host admin", LogUntrusted: true, SpreadTime: true}},
		{"master, SETDATEREQ from a known slave", DateMaster, req(-30*time.Second, true, true),
			DateDecision{DateAck: true, Target: now.Add(-30 * time.Second), Step: true, SpreadTime: true, Dictate: 2}},
		{"master, SETDATEREQ from an unknown host", DateMaster, req(time.Second, false, true),
			DateDecision{Ignore: true, Reason: "SETDATEREQ from an unknown slave or with a repeated seq"}},
		{"master, repeated SETDATEREQ", DateMaster, req(time.Second, true, false),
			DateDecision{Ignore: true, Reason: "SETDATEREQ from an unknown slave or with a repeated seq"}},
		{"slave: forward to the master", DateSlave, setdate(time.Minute, true),
			DateDecision{ForwardReq: true, Target: now.Add(time.Minute + 2*ms)}},
		{"submaster relays a slave's request", DateSlave, req(time.Minute, true, true),
			DateDecision{ForwardReq: true, Target: now.Add(time.Minute)}},
		{"slave, untrusted", DateSlave, setdate(time.Minute, false),
			DateDecision{Ignore: true, Reason: "date request from untrusted host admin", LogUntrusted: true}},
		{"no master", DateNoMaster, setdate(time.Minute, true),
			DateDecision{Ignore: true, Reason: "no master to ask: not a slave on any net"}},
		{"not a date message", DateMaster, DateRequest{Type: tsp.AdjTime},
			DateDecision{Ignore: true, Reason: "not a date request: ADJTIME"}},
	}
	for _, c := range cases {
		got := DecideDate(c.role, c.req, now, 0)
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	// The threshold is configurable.
	if d := DecideDate(DateMaster, setdate(5*time.Second, true), now, time.Second); !d.Step {
		t.Errorf("5 s with a 1 s threshold: %+v", d)
	}
}
