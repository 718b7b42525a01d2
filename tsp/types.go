package tsp

import (
	"strconv"
	"strings"
)

// Type is a TSP message type, the first byte of every packet.
type Type uint8

// The message types of include/protocols/timed.h, numbered as on the wire.
const (
	Any        Type = 0  // never sent; readmsg's wildcard
	AdjTime    Type = 1  // master → slave: slew by the carried correction
	Ack        Type = 2  // generic acknowledgement, echoes seq
	MasterReq  Type = 3  // who is the master?
	MasterAck  Type = 4  // the master answers MasterReq and Resolve
	SetTime    Type = 5  // master → slave: step to the carried time
	MasterUp   Type = 6  // a new master announces itself
	SlaveUp    Type = 7  // a slave announces itself to its master
	Election   Type = 8  // a candidate asks for votes
	Accept     Type = 9  // a slave votes for a candidate
	Refuse     Type = 10 // a slave or rival candidate refuses
	Conflict   Type = 11 // a slave saw two masters
	Resolve    Type = 12 // a master asks every other master to answer
	Quit       Type = 13 // step down / stop being a candidate
	Date       Type = 14 // obsolete since 1986
	DateReq    Type = 15 // obsolete since 1986
	DateAck    Type = 16 // the date change was done
	TraceOn    Type = 17 // timedc: start tracing
	TraceOff   Type = 18 // timedc: stop tracing
	MSite      Type = 19 // timedc: who is your master?
	MSiteReq   Type = 20 // slave asks its net who the master is
	Test       Type = 21 // timedc election: start an election now
	SetDate    Type = 22 // date(1) → local daemon: set the network date
	SetDateReq Type = 23 // slave → master: please set the date
	Loop       Type = 24 // master's loop-detection probe, carries a hop count

	// NumTypes is TSPTYPENUMBER: types at or above it are unknown. They
	// decode with their number and the caller drops them.
	NumTypes = 25
)

var typeNames = [NumTypes]string{
	"ANY", "ADJTIME", "ACK", "MASTERREQ", "MASTERACK", "SETTIME", "MASTERUP",
	"SLAVEUP", "ELECTION", "ACCEPT", "REFUSE", "CONFLICT", "RESOLVE", "QUIT",
	"DATE", "DATEREQ", "DATEACK", "TRACEON", "TRACEOFF", "MSITE", "MSITEREQ",
	"TEST", "SETDATE", "SETDATEREQ", "LOOP",
}

// String returns BSD's name for the type (timed.h's tsptype[]), or
// "TYPE(n)" for a type BSD does not know.
func (t Type) String() string {
	if t.Known() {
		return typeNames[t]
	}
	return "TYPE(" + strconv.Itoa(int(t)) + ")"
}

// Known reports whether t is one of the 25 BSD types.
func (t Type) Known() bool { return t < NumTypes }

// CarriesTime reports whether the packet's union holds a time value
// (byteorder.c swaps the time only for these four types).
func (t Type) CarriesTime() bool {
	switch t {
	case AdjTime, SetTime, SetDate, SetDateReq:
		return true
	}
	return false
}

// ParseType maps a BSD name ("ADJTIME", case-insensitive) back to its Type.
func ParseType(name string) (Type, bool) {
	for i, n := range typeNames {
		if strings.EqualFold(n, name) {
			return Type(i), true
		}
	}
	return 0, false
}
