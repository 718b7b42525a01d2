package election

import "github.com/timed-project/timed/tsp"

// Role is the state a daemon is in on a network, as far as its automatic
// answers go (BSD's readmsg: slaveack, masterack, ignoreack).
type Role string

// The roles of the reply table.
const (
	RoleMaster Role = "master"
	RoleSlave  Role = "slave"
)

// ReplyRule is one row of the reply table: what a daemon in Role answers
// to a message of Type, in BSD and in ours. tsp.Any means no answer.
type ReplyRule struct {
	Type tsp.Type
	Role Role
	BSD  tsp.Type // FreeBSD's answer (readmsg.c's automatic one)
	Ours tsp.Type // ours, from a sender the rule allows
	// Runtime: the daemon answers it, not the machine (admin types).
	Runtime bool
	// Note says where ours differs from BSD's, or on what condition.
	Note string
}

// Replies is the reply table: every message type a daemon answers at
// once, by role, BSD's answer beside ours. Types not listed get no
// immediate answer in either (ELECTION is answered by ACCEPT/REFUSE or
// QUIT, a decision rather than an acknowledgement; MASTERUP by SLAVEUP,
// after the answer delay). The machine's rows are walked by
// TestReplyTable; the runtime's by the integration tests. Our version-2
// extensions, which BSD drops unread, are not rows: a Host that is master
// on the network answers tsp.ExtSourceReq with tsp.ExtSource (source.go,
// TestHostTellsSource), and the probe is the clock layer's.
var Replies = []ReplyRule{
	{Type: tsp.AdjTime, Role: RoleSlave, BSD: tsp.Ack, Ours: tsp.Ack, Note: "only from the address of the master followed, or of one heard acting as master once it has been silent a sync interval (then followed); none otherwise"},
	{Type: tsp.SetTime, Role: RoleSlave, BSD: tsp.Ack, Ours: tsp.Ack, Note: "only from the address of the master followed, or of one heard acting as master once it has been silent a sync interval (then followed); none otherwise"},
	{Type: tsp.Accept, Role: RoleSlave, BSD: tsp.Ack, Ours: tsp.Ack},
	{Type: tsp.Refuse, Role: RoleSlave, BSD: tsp.Ack, Ours: tsp.Ack},
	{Type: tsp.Quit, Role: RoleSlave, BSD: tsp.Ack, Ours: tsp.Ack},
	{Type: tsp.Conflict, Role: RoleSlave, BSD: tsp.Any, Ours: tsp.Ack, Note: "BSD's sender waits for an ACK nobody sent"},
	{Type: tsp.Accept, Role: RoleMaster, BSD: tsp.Any, Ours: tsp.Ack, Note: "a late ACCEPT whose ACK was lost: answered, sender listed"},
	{Type: tsp.Refuse, Role: RoleMaster, BSD: tsp.Any, Ours: tsp.Ack},
	{Type: tsp.Quit, Role: RoleMaster, BSD: tsp.Ack, Ours: tsp.Ack, Note: "only from a host known as a master or on the -F list; others are asked with MASTERREQ. A Host refuses it (acknowledged all the same) from a master it outranks (claim, span, time source); unacknowledged where both told each other to quit and this host, the lower name, stays"},
	{Type: tsp.MasterReq, Role: RoleMaster, BSD: tsp.MasterAck, Ours: tsp.MasterAck},
	{Type: tsp.Resolve, Role: RoleMaster, BSD: tsp.MasterAck, Ours: tsp.MasterAck},
	{Type: tsp.MSiteReq, Role: RoleMaster, BSD: tsp.Ack, Ours: tsp.Ack, Note: "a BSD slave asks it to answer timedc msite"},
	{Type: tsp.Conflict, Role: RoleMaster, BSD: tsp.Any, Ours: tsp.Ack},
	{Type: tsp.TraceOn, Role: RoleMaster, BSD: tsp.Ack, Ours: tsp.Ack, Runtime: true, Note: "only from a reserved port on this host"},
	{Type: tsp.TraceOff, Role: RoleSlave, BSD: tsp.Ack, Ours: tsp.Ack, Runtime: true, Note: "only from a reserved port on this host"},
	{Type: tsp.MSite, Role: RoleMaster, BSD: tsp.Ack, Ours: tsp.Ack, Runtime: true, Note: "name: this host"},
	{Type: tsp.MSite, Role: RoleSlave, BSD: tsp.Ack, Ours: tsp.Ack, Runtime: true, Note: "name: the master; BSD asks it with MSITEREQ first, ours knows it"},
	{Type: tsp.SetDate, Role: RoleMaster, BSD: tsp.DateAck, Ours: tsp.DateAck, Runtime: true, Note: "only from a reserved port on this host"},
}
