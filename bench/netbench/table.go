package netbench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Result is one N's run.
type Result struct {
	N      int
	Family Family // what the links held: IPv4 (BSD's broadcast) or IPv6 (the link-local group)
	// Profile is the daemons' settings; a zero one is named nowhere.
	Profile Profile
	// Interval is the profile's sync interval, where rounds are fixed (0
	// where they adapt): the table gives times in rounds too.
	Interval time.Duration
	Err      error // the run failed: its figures are what was measured before
	// Unsettled: the spread did not stay under 1 ms through the steady
	// window, so that window is not a steady state.
	Unsettled bool
	Figures
	RSSMedian, RSSMax uint64 // bytes, at the end of the run
}

// Anchors: BSD's (and the TEMPO paper's) figures beside each row.
const (
	AnchorMaster  = "BSD: its election timer, 6–15 min (fast profile: 6–15 s)"
	AnchorSpread  = "TEMPO paper: ~20 ms"
	AnchorSettle  = "BSD: never (TEMPO: ~20 ms)"
	AnchorPackets = "BSD: ~12 (5 ICMP timestamp pairs + ADJTIME + ACK)"
	AnchorMinute  = "BSD: 3 (12 a 240 s round); budget: ≤ 6 over the first hour, ≤ 3 steady"
)

// Table is the results as a Markdown table: a row per measure, a column
// per run (N, its profile where one is named, and its family where a run
// was not on IPv4), and BSD's figure last.
func Table(rs []Result) string {
	header := []string{"measure"}
	families := slices.ContainsFunc(rs, func(r Result) bool { return r.Family != IPv4 })
	for _, r := range rs {
		h := fmt.Sprintf("N=%d", r.N)
		if r.Profile.Label != "" {
			h += " " + r.Profile.Label
		}
		if families {
			h += " " + r.Family.String()
		}
		header = append(header, h)
	}
	header = append(header, "anchor")
	row := func(label, anchor string, cell func(Result) string) []string {
		cells := []string{label}
		for _, r := range rs {
			cells = append(cells, cell(r))
		}
		return append(cells, anchor)
	}
	settle := func(d time.Duration, ok bool, interval time.Duration) string {
		if !ok {
			return "not in the run"
		}
		s := fmt.Sprintf("%.1f s", d.Seconds())
		if interval > 0 {
			s += fmt.Sprintf(" (%.1f rounds)", d.Seconds()/interval.Seconds())
		}
		return s
	}
	rows := [][]string{
		row("one master after all start at once", AnchorMaster, func(r Result) string {
			switch {
			case r.HasMaster:
				return fmt.Sprintf("%.1f s", r.MasterAfter.Seconds())
			case r.Err != nil:
				return "failed: " + r.Err.Error()
			}
			return "none"
		}),
		row("steady spread of the clocks, p50 / p95 / max", AnchorSpread, func(r Result) string {
			if r.SpreadSamples == 0 {
				return "—"
			}
			s := Seconds(r.P50) + " / " + Seconds(r.P95) + " / " + Seconds(r.Max)
			if r.Unsettled {
				s += " (not settled: not under 1 ms for the window)"
			}
			return s
		}),
		row("time until spread < 1 ms for good", AnchorSettle, func(r Result) string { return settle(r.Under1ms, r.Settled1ms, r.Interval) }),
		row("time until spread < 100 µs for good", AnchorSettle, func(r Result) string { return settle(r.Under100us, r.Settled100us, r.Interval) }),
		row("packets per slave per minute without LOOP, whole run / steady window", AnchorMinute, func(r Result) string {
			return number(r.PerSlaveMinute, "%.1f") + " / " + number(r.PerSlaveMinuteSteady, "%.1f")
		}),
		row("packets per slave per sync round, all / without LOOP", AnchorPackets, func(r Result) string {
			return number(r.PacketsPerSlaveRound, "%.1f") + " / " + number(r.MeasurePacketsPerSlaveRound, "%.1f")
		}),
		row("RSS per daemon, median / max", "—", func(r Result) string {
			if r.RSSMax == 0 {
				return "—"
			}
			return fmt.Sprintf("%.1f / %.1f MB", float64(r.RSSMedian)/(1<<20), float64(r.RSSMax)/(1<<20))
		}),
		row("CPU per daemon, master / median slave", "—", func(r Result) string {
			if math.IsNaN(r.CPUMaster) {
				return "—"
			}
			return fmt.Sprintf("%.2f / %.2f %% of a core", 100*r.CPUMaster, 100*r.CPUSlave)
		}),
		row("steady window: sync rounds, samples, p95 time to read all offsets", "—", func(r Result) string {
			return fmt.Sprintf("%s, %d, %.0f ms", number(r.Rounds, "%.0f"), r.SpreadSamples, r.PollP95.Seconds()*1e3)
		}),
	}
	return Markdown(header, rows)
}

// Seconds formats a spread: µs below a millisecond, ms below a second.
func Seconds(s float64) string {
	switch a := math.Abs(s); {
	case math.IsNaN(s):
		return "—"
	case a < 1e-3:
		return fmt.Sprintf("%.0f µs", s*1e6)
	case a < 1:
		return fmt.Sprintf("%.2f ms", s*1e3)
	}
	return fmt.Sprintf("%.3f s", s)
}

func number(v float64, format string) string {
	if math.IsNaN(v) {
		return "—"
	}
	return fmt.Sprintf(format, v)
}

// Markdown lays out a table, its columns padded to line up in a terminal
// too. Cells must not hold '|' or newlines; those are replaced.
func Markdown(header []string, rows [][]string) string {
	clean := strings.NewReplacer("|", "/", "\n", " ")
	var all [][]string
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		c := make([]string, len(r))
		for i := range r {
			c[i] = clean.Replace(r[i])
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c[i]), 3)
			}
		}
		all = append(all, c)
	}
	var b strings.Builder
	line := func(cells []string) {
		b.WriteString("|")
		for i, w := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			b.WriteString(" " + c + strings.Repeat(" ", w-utf8.RuneCountInString(c)) + " |")
		}
		b.WriteString("\n")
	}
	line(all[0])
	sep := make([]string, len(width))
	for i, w := range width {
		sep[i] = strings.Repeat("-", w)
	}
	line(sep)
	for _, r := range all[1:] {
		line(r)
	}
	return b.String()
}
