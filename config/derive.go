package config

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Dependent defaults.
//
// Some timers must keep an order with others (the election package
// refuses a Config that does not). A timer the user did not set is a
// default, and a default never makes start-up fail: when the profile's
// value breaks an order with a value the user set, it is derived from
// that value instead. Only a value the user gave is ever refused.
//
// The orders, each with the timer that follows the other:
//
//	first-sync      ≤ sync-interval         first-sync follows sync-interval
//	sync-interval   < election-timeout-min  each follows the other
//	election-timeout-min < election-timeout-max  each follows the other
//	fast-election   ≤ election-timeout-min  fast-election follows election-timeout-min
//	accept-window   < election-timeout-min  accept-window follows election-timeout-min
//	cold-start-delay ≤ election-timeout-min cold-start-delay follows election-timeout-min
//	answer-delay    < candidate-wait        answer-delay follows candidate-wait
//	step-threshold  ≤ max-step              step-threshold follows max-step
//
// The rule for an unset timer that follows set (or already derived) ones:
//
//  1. It keeps the profile's value if that already keeps its orders.
//  2. Otherwise it is scaled from the value it is out of order with,
//     keeping the profile's ratio between the two: with BSD's profile,
//     --election-timeout-min 4s makes sync-interval 4s × 240/360 = 2.667s
//     and accept-window 4s × 30/360 = 333.333ms; --sync-interval 500s
//     makes election-timeout-min 500s × 360/240 = 750s (and
//     election-timeout-max keeps 900s, which is still above it).
//  3. Squeezed between two set values that leave no room for either
//     scaling, it takes the profile's relative place between them.
//
// Values derived are rounded (to the millisecond from 1s, the microsecond
// from 1ms) where rounding keeps the orders, and kept in their key's
// accepted range. The derivation spreads from the values set: a timer
// derived can make the next one follow (--election-timeout-min 4s makes
// sync-interval 2.667s, and so first-sync 33.333ms).
//
// The sync interval and the election timers follow each other both ways
// because together they are the protocol's one time scale: a user who
// shortens the election timers wants faster rounds. The others follow one
// way only: a user-given accept-window, fast-election, cold-start-delay,
// first-sync, answer-delay or step-threshold out of order is refused,
// naming it, rather than moving the timer it depends on.

// order is one order between two timers: lo < hi, or lo ≤ hi when not
// strict. dep is the timer that follows the other; with mutual, the other
// also follows dep when only dep was set.
type order struct {
	lo, hi string
	strict bool
	dep    string
	mutual bool
}

var orders = []order{
	{lo: "first-sync", hi: "sync-interval", dep: "first-sync"},
	{lo: "sync-interval", hi: "election-timeout-min", strict: true, dep: "election-timeout-min", mutual: true},
	{lo: "election-timeout-min", hi: "election-timeout-max", strict: true, dep: "election-timeout-max", mutual: true},
	{lo: "fast-election", hi: "election-timeout-min", dep: "fast-election"},
	{lo: "accept-window", hi: "election-timeout-min", strict: true, dep: "accept-window"},
	{lo: "cold-start-delay", hi: "election-timeout-min", dep: "cold-start-delay"},
	{lo: "answer-delay", hi: "candidate-wait", strict: true, dep: "answer-delay"},
	{lo: "step-threshold", hi: "max-step", dep: "step-threshold"},
}

// follows: in o, w takes its default from the other end.
func (o order) follows(w string) bool { return o.dep == w || o.mutual }

func (o order) other(k string) (string, bool) {
	switch k {
	case o.lo:
		return o.hi, true
	case o.hi:
		return o.lo, true
	}
	return "", false
}

func (o order) holds(lo, hi time.Duration) bool {
	if o.strict {
		return lo < hi
	}
	return lo <= hi
}

// timers are the duration keys of one load: their values (in the Config),
// the profile's, which the user set, and where derived ones came from.
type timers struct {
	c       *Config
	profile map[string]time.Duration
	set     map[string]string // key → the value the user gave
	from    map[string]string // derived key → the key it follows
}

func newTimers(c *Config) *timers {
	t := &timers{c: c, profile: map[string]time.Duration{}, set: map[string]string{}, from: map[string]string{}}
	for _, k := range durationKeys {
		t.profile[k.key] = *k.field(c)
	}
	return t
}

func (t *timers) key(name string) durationKey {
	for _, k := range durationKeys {
		if k.key == name {
			return k
		}
	}
	panic("config: no timer " + name)
}

func (t *timers) get(name string) time.Duration { return *t.key(name).field(t.c) }

func (t *timers) put(name string, d time.Duration) { *t.key(name).field(t.c) = d }

// derive gives each unset timer that follows a set one its derived
// default, spreading from the values set, then checks every order and
// returns an error, naming a key the user set, for each that fails.
func (t *timers) derive() []error {
	settled := map[string]bool{}
	var queue []string
	for _, k := range durationKeys {
		if _, ok := t.set[k.key]; ok {
			settled[k.key] = true
			queue = append(queue, k.key)
		}
	}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, o := range orders {
			w, ok := o.other(u)
			if !ok || settled[w] || !o.follows(w) {
				continue
			}
			t.deriveOne(w, settled)
			settled[w] = true
			queue = append(queue, w)
		}
	}
	var errs []error
	for _, o := range orders {
		if !o.holds(t.get(o.lo), t.get(o.hi)) {
			errs = append(errs, t.orderError(o))
		}
	}
	return errs
}

// bound is a settled timer that w must stay above (lower) or below.
type bound struct {
	key    string
	lower  bool
	strict bool
}

func (t *timers) deriveOne(w string, settled map[string]bool) {
	var bounds []bound
	for _, o := range orders {
		other, ok := o.other(w)
		if !ok || !settled[other] || !o.follows(w) {
			continue
		}
		bounds = append(bounds, bound{key: other, lower: other == o.lo, strict: o.strict})
	}
	fits := func(d time.Duration) bool {
		for _, b := range bounds {
			v := t.get(b.key)
			switch {
			case b.lower && b.strict && d <= v, b.lower && !b.strict && d < v,
				!b.lower && b.strict && d >= v, !b.lower && !b.strict && d > v:
				return false
			}
		}
		return true
	}
	p := t.profile[w]
	if fits(p) {
		t.put(w, p)
		return
	}
	// Scale from the bound it breaks: the highest lower bound broken, else
	// the lowest upper bound.
	var from string
	var d time.Duration
	for _, b := range bounds {
		v := t.get(b.key)
		if !b.lower || (b.strict && p > v) || (!b.strict && p >= v) {
			continue
		}
		if s := t.scale(w, b.key); from == "" || s > d {
			from, d = b.key, s
		}
	}
	if from == "" {
		for _, b := range bounds {
			v := t.get(b.key)
			if b.lower || (b.strict && p < v) || (!b.strict && p <= v) {
				continue
			}
			if s := t.scale(w, b.key); from == "" || s < d {
				from, d = b.key, s
			}
		}
	}
	if !fits(d) {
		d, from = t.between(w, bounds, d, from)
	}
	if r := round(d); fits(r) {
		d = r
	}
	k := t.key(w)
	d = max(k.min, min(k.max, d))
	t.put(w, d)
	t.from[w] = from
}

// scale is w's profile value scaled by the ratio of from's value to its
// profile value.
func (t *timers) scale(w, from string) time.Duration {
	pf := t.profile[from]
	if pf <= 0 {
		return t.profile[w]
	}
	f := float64(t.get(from)) * float64(t.profile[w]) / float64(pf)
	return time.Duration(math.Min(f, float64(math.MaxInt64/2)))
}

// between places w between its tightest lower and upper bounds, where the
// profile puts it between the same two timers. If the bounds leave no
// room, d stays as it was and the final check names the values set.
func (t *timers) between(w string, bounds []bound, d time.Duration, from string) (time.Duration, string) {
	var lo, hi string
	for _, b := range bounds {
		v := t.get(b.key)
		if b.lower && (lo == "" || v > t.get(lo)) {
			lo = b.key
		}
		if !b.lower && (hi == "" || v < t.get(hi)) {
			hi = b.key
		}
	}
	if lo == "" || hi == "" || t.get(lo) >= t.get(hi) {
		return d, from
	}
	pl, ph, p := t.profile[lo], t.profile[hi], t.profile[w]
	frac := 0.5
	if ph > pl && p > pl && p < ph {
		frac = float64(p-pl) / float64(ph-pl)
	}
	vl, vh := t.get(lo), t.get(hi)
	return vl + time.Duration(frac*float64(vh-vl)), lo + " and " + hi
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Microsecond)
	}
	return d
}

// describe is a timer with its value, and what it follows if derived.
func (t *timers) describe(k string) string {
	s := fmt.Sprintf("%s (%v", k, t.get(k))
	if f := t.from[k]; f != "" {
		s += ", derived from " + f
	}
	return s + ")"
}

// orderError names the key the user set that breaks o: the timer that
// follows if the user set it, else the other; if the user set neither
// (both were derived, from values set elsewhere that cannot agree), the
// value set that the lower one was derived from.
func (t *timers) orderError(o order) error {
	below, above := "less than ", "more than "
	if !o.strict {
		below, above = "at most ", "at least "
	}
	accepted := func(k string) string {
		if k == o.lo {
			return below + t.describe(o.hi)
		}
		return above + t.describe(o.lo)
	}
	base, _ := o.other(o.dep)
	for _, k := range []string{o.dep, base} {
		if raw, ok := t.set[k]; ok {
			return &Error{Key: k, Value: raw, Accepted: accepted(k)}
		}
	}
	k := o.lo
	for i := 0; i < len(durationKeys); i++ {
		if _, ok := t.set[k]; ok {
			break
		}
		f, _, _ := strings.Cut(t.from[k], " and ")
		if f == "" {
			break
		}
		k = f
	}
	rel := " < "
	if !o.strict {
		rel = " ≤ "
	}
	return &Error{Key: k, Value: t.set[k], Accepted: "a value that leaves room for " + t.describe(o.lo) + rel + t.describe(o.hi)}
}

// floor keeps sync-interval-min at or below sync-interval: an unset
// floor follows the sync interval down (and, with the fast profile,
// equals it: fixed rounds); one the user set above it is an error.
func (t *timers) floor(profile string) []error {
	const key = "sync-interval-min"
	floor, ceiling := t.get(key), t.get("sync-interval")
	if _, set := t.set[key]; set {
		if floor > ceiling {
			return []error{&Error{Key: key, Value: t.set[key], Accepted: fmt.Sprintf("at most sync-interval (%v)", ceiling)}}
		}
		return nil
	}
	if floor > ceiling || profile == "fast" && floor != ceiling {
		t.put(key, ceiling)
		t.from[key] = "sync-interval"
	}
	return nil
}
