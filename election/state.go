package election

import "strconv"

// State is the election state of one daemon on one network, as in §6.1 of
// Gusella and Zatti's paper.
type State uint8

// The states of the paper's Figure 3.
const (
	// StartUp: MASTERREQ has been broadcast and the daemon waits for a
	// MASTERACK. A host that may not be master also "polls" in this state
	// while it has no master.
	StartUp State = iota
	// NoMaster: nobody answered; the daemon becomes master when its timer
	// runs out unless another daemon shows up.
	NoMaster
	// Slave: the daemon follows a master (or waits for one) and runs the
	// election timer.
	Slave
	// Candidate: the election timer ran out; ELECTION was broadcast.
	Candidate
	// Accept: a slave that has voted for a candidate and refuses the others
	// until the accept window ends.
	Accept
	// Master: the daemon synchronises its slaves.
	Master
	// Conflict: a master that was told of another master looks for it with
	// RESOLVE and tells it to QUIT.
	Conflict
	// Consistency: a starting daemon got a MASTERACK and waits a short
	// window for a second one.
	Consistency

	numStates
)

var stateNames = [numStates]string{
	"startup", "nomaster", "slave", "candidate", "accept", "master", "conflict", "consistency",
}

// String returns the lower-case name of the state ("master", "slave", …).
func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// IsMaster reports whether the daemon acts as master in this state
// (Conflict is a master resolving a conflict).
func (s State) IsMaster() bool { return s == Master || s == Conflict }
