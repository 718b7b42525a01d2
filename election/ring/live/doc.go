// Package live runs the election/ring algorithms live among timed daemons
// (`timedc ring elect`): their messages travel in tsp.ExtRing packets, the
// coordination in tsp.ExtRingCtl packets (JSON), so BSD daemons ignore
// all of it.
//
// It imports no socket package (only net/netip): the daemon carries the
// packets and owns the clock.
package live
