// Package auth is keyed authentication for TSP: a trailer with an HMAC
// after each datagram, which BSD daemons never read, and the policy that
// decides on received datagrams.
package auth
