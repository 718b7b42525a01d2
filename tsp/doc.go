// Package tsp owns the Time Synchronization Protocol of 4.3BSD timed: the
// 268-byte wire format that FreeBSD's daemon sends (and the shorter 4.3BSD
// forms it still accepts), and the UDP transport that carries it between
// daemons.
//
// The package knows nothing of elections or clocks: it encodes, decodes,
// sends and receives. Decoding accepts exactly what the BSD receiver
// (readmsg.c) accepts, so that a daemon built on it interoperates with BSD
// daemons in both directions.
package tsp
