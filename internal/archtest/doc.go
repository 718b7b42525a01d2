// Package archtest holds no code: its tests check the module's dependency
// rules with `go list`, so that a pure package cannot quietly start to
// depend on the network. The rules:
//
//   - the election state machine and everything under election/ (ring
//     algorithms, simulator) do not depend on package net;
//   - tsp, the wire format, does not depend on net, and imports neither
//     net, os nor syscall itself (fmt may bring os in: that is not I/O
//     of its own);
//   - clocksync uses the wire format only, never the transport tsp/udp;
//   - internal/ is the ground floor: no package under it depends on a
//     package of the module outside it (tsp/udp, tsp/auth, clocksync,
//     election, config, …). Benchmark harnesses live in bench/, the
//     man-page generator in cmd/internal/gendocs.
//
// Only non-test code is checked: what a package's tests import is not
// part of what it costs its users.
package archtest
