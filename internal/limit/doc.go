// Package limit bounds what a flood can cost the daemon before any of its
// state changes: per-source token buckets with an aggregate cap (Limiter),
// counters by reason (Counter), and logging that says a thing a bounded
// number of times (LogLimiter, Logger, Once).
//
// Every table is bounded and evicts its least recently used entry, so a
// flood from spoofed, ever-changing source addresses costs a fixed amount
// of memory; every rate is also capped in aggregate, so such a flood costs
// a fixed amount of work and log. Time is always an argument: nothing here
// reads the clock, and callers should pass a monotonic reading (time.Now(),
// not a kernel receive timestamp, which a clock step moves).
//
// All types are safe for concurrent use.
package limit
