package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/timed/control"
)

// localHost is the "host" of the answers that come over the control
// socket, which is always this host's daemon.
const localHost = "localhost"

func statusCmd(o *options) *cobra.Command {
	return watchedLocal(o, &cobra.Command{
		Use:   "status",
		Short: "show whether the local daemon's clock is synchronised, its offset, frequency, master, networks and counters (control socket)",
		Long: `status shows the local daemon's state, led by the clock's: synchronised,
unsynchronised or alarm, and why; its offset from network time (estimated, with its
error bound where this host knows one), its frequency, its last correction; then
the master, the networks, the slaves and the counters. With --watch it redraws
every --interval until Ctrl-C.`,
	}, control.Request{Cmd: control.CmdStatus}, "a status", func(resp *control.Response) (any, string, bool) {
		if resp.Status == nil {
			return nil, "", false
		}
		return resp.Status, statusText(resp.Status), true
	})
}

func sourcesCmd(o *options) *cobra.Command {
	return watchedLocal(o, &cobra.Command{
		Use:   "sources",
		Short: "list the hosts the local daemon measures (as master) or follows (as slave), as chronyc sources does (control socket)",
		Long: `sources lists, one row per host, the slaves the local daemon measures as master
or the master it follows as slave: its role, state, reach (the last 8 rounds in
octal, as chrony's: 377 is all eight), last offset (its clock minus this one),
error bound, round trip, age, measurement method (probe or icmp) and, for a
slave measured by probe, how its send times were stamped (kernel, user or
mixed). A slave shows what its master's corrections say; their error and
round trip are the master's to tell. With --watch it redraws every --interval until Ctrl-C.`,
	}, control.Request{Cmd: control.CmdSources}, "its sources", func(resp *control.Response) (any, string, bool) {
		if resp.Sources == nil {
			return nil, "", false
		}
		return resp.Sources, sourcesText(resp.Sources), true
	})
}

// watchedLocal makes cmd ask the local daemon req and print what answer
// picks from its response (as local), once or with --watch.
func watchedLocal(o *options, cmd *cobra.Command, req control.Request, what string, answer func(*control.Response) (any, string, bool)) *cobra.Command {
	var w watchFlags
	cmd.Args = cobra.NoArgs
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		return o.watchOr(cmd.Context(), w, func() error { return o.local(cmd.Context(), req, what, answer) })
	}
	w.add(cmd)
	return cmd
}

// local sends req to the local daemon and prints its answer as
// forEachHost's, from localHost, with the control socket among the
// fields: answer picks from the response what to print (the JSON fields
// and the text), ok false if the daemon answered without it (what names
// it).
func (o *options) local(ctx context.Context, req control.Request, what string, answer func(*control.Response) (v any, text string, ok bool)) error {
	return o.forEachHost([]string{localHost}, func(string) (string, map[string]any, error) {
		ctx, cancel := context.WithTimeout(ctx, o.wait(5*time.Second))
		defer cancel()
		resp, err := o.call(ctx, req)
		if err != nil {
			return "", nil, err
		}
		v, text, ok := answer(resp)
		if !ok {
			return "", nil, fmt.Errorf("timed at %s answered without %s", o.controlSocket, what)
		}
		fields, err := fieldsOf(v)
		if err != nil {
			return "", nil, err
		}
		fields["control_socket"] = o.controlSocket
		return text, fields, nil
	})
}

// statusText is status for a person: the alarm first, then the sync
// state and why, the role, then chronyc tracking's kind of lines, the
// slaves' table and the counters.
func statusText(s *control.Status) string {
	var b strings.Builder
	if a := s.Alarm; a != nil {
		// First, so that no one reads past it.
		fmt.Fprintf(&b, "ALARM since %s: clock %+.3f s from network time, beyond max-step %s; it moves back by max-step a round at most, "+
			"%d corrections refused; `timedc step --to-network` steps it now\n",
			a.Since.Format(time.RFC3339), a.OffsetSecs, secs(a.MaxStepSecs), a.Refused)
	}
	y := s.Sync
	if y != nil {
		fmt.Fprintf(&b, "%s: %s\n", y.State, y.Reason)
	}
	fmt.Fprintf(&b, "%s is %s for %s", s.Hostname, s.State, secs(s.InStateSecs))
	if s.Master != nil && s.State != "master" {
		fmt.Fprintf(&b, "; master %s (%s)", s.Master.Name, s.Master.Address)
	}
	b.WriteString("\n\n")
	tw := tabwriter.NewWriter(&b, 2, 4, 1, ' ', 0)
	row := func(key, format string, a ...any) { fmt.Fprintf(tw, "%s:\t%s\n", key, fmt.Sprintf(format, a...)) }
	if y != nil {
		row("offset", "%s", offsetLine(y))
		row("frequency", "%s", frequencyLine(y))
	} else {
		row("frequency", "%+.3f ppm", s.FrequencyPPM)
	}
	switch c := s.LastCorrection; {
	case c == nil:
		row("last correction", "none yet")
	case y != nil && y.LastCorrectionAgeSecs != nil:
		from := orUnknown(c.From)
		if c.From == s.Hostname {
			from = "this host's round (its own share)"
		}
		row("last correction", "%s %s from %s, %s ago", c.Kind, offsetStr(c.Secs), from, secs(*y.LastCorrectionAgeSecs))
	default:
		row("last correction", "%s %s at %s", c.Kind, offsetStr(c.Secs), c.At.Format(time.RFC3339))
	}
	if y != nil {
		row("sync interval", "%s (synchronised: a correction or round within 2 of them)", secs(y.SyncIntervalSecs))
	}
	if strings.HasPrefix(s.Clock, "sim") {
		// The start-up setting and where the simulated clock is now: the
		// truth tests compare clocks by, not network time.
		row("clock", "%s as started; now %s from the kernel clock (simulated clock, for tests)", s.Clock, offsetStr(s.OffsetSecs))
	} else {
		row("clock", "%s", s.Clock)
	}
	if k := s.KernelSync; k != nil {
		row("kernel", "%s", kernelLine(k))
	}
	if r := s.Reference; r != nil {
		row("reference", "%s", referenceLine(r))
	}
	if y != nil && y.UTCVia != "" && y.UTCBoundSecs != nil && y.ReferenceMaxErrorSecs != nil {
		row("UTC", "within %s via %s (its kernel maxerror %s)", magnitude(*y.UTCBoundSecs), y.UTCVia, magnitude(*y.ReferenceMaxErrorSecs))
	}
	elections := fmt.Sprintf("%d seen", s.Elections)
	if s.LastElection > 0 {
		elections += fmt.Sprintf(", last took %s", secs(s.LastElection))
	}
	row("elections", "%s", elections)
	for _, n := range s.Networks {
		row("network", "%s", networkLine(n))
	}
	_ = tw.Flush() // into a strings.Builder: cannot fail
	if len(s.Slaves) > 0 {
		tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nSLAVE\tADDRESS\tOFFSET\tERROR\tRTT\tLAST SEEN")
		for _, sl := range s.Slaves {
			fmt.Fprintf(tw, "%s\t%s\t%+.3f ms\t±%.3f ms\t%.3f ms\t%s\n", sl.Name, sl.Address,
				sl.OffsetSecs*1e3, sl.ErrorBoundSecs*1e3, sl.RTTSecs*1e3, sl.LastSeen.Format(time.TimeOnly))
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(&b, "\npackets %s\ndrops %s", counters(s.Packets), drops(s.Drops))
	return b.String()
}

// referenceLine is a reference host's own state (--reference kernel).
func referenceLine(r *control.Reference) string {
	claim := "not claiming (the kernel's clock is not synchronised within the bound)"
	if r.Claiming {
		claim = "claiming: this clock is the network time when master"
	}
	kernel := "kernel says unsynchronised"
	if r.KernelSynchronised {
		kernel = "kernel says synchronised, maxerror " + magnitude(r.KernelMaxErrorSecs)
	}
	if r.Error != "" {
		kernel = "kernel state unreadable: " + r.Error
	}
	return fmt.Sprintf("%s; %s (bound %s); %d corrections ignored", claim, kernel, magnitude(r.MaxErrorBoundSecs), r.CorrectionsIgnored)
}

// offsetLine is the estimate of the offset from network time and what it
// rests on, saying what this host cannot know.
func offsetLine(y *control.Sync) string {
	if y.OffsetSecs == nil {
		return "unknown: no correction or round yet"
	}
	off := offsetStr(*y.OffsetSecs)
	if y.ErrorBoundSecs != nil {
		off += " ±" + magnitude(*y.ErrorBoundSecs)
	}
	off += " from network time"
	age := ""
	if y.BasisAgeSecs != nil {
		age = secs(*y.BasisAgeSecs) + " ago"
	}
	switch y.Basis {
	case "alone":
		return off + " (alone on its network: this clock is the network time)"
	case "alarm":
		return off + " (the alarm's: the last correction asked for, less the max-step moves since)"
	case "round":
		return off + " (estimated from this master's round " + age + ")"
	case "correction":
		pending := ""
		if y.PendingSlewSecs != 0 {
			pending = ", " + offsetStr(y.PendingSlewSecs) + " still to slew"
		}
		return fmt.Sprintf("%s (estimated from %s's correction %s%s; its error is known to %s alone, which measured it)",
			off, y.BasisFrom, age, pending, y.BasisFrom)
	}
	return off
}

func frequencyLine(y *control.Sync) string {
	line := fmt.Sprintf("%+.3f ppm", y.FrequencyPPM)
	if y.FrequencyChangeAgeSecs != nil {
		line += fmt.Sprintf(", last change %+.3f ppm %s ago", y.FrequencyChangePPM, secs(*y.FrequencyChangeAgeSecs))
	} else {
		line += ", unchanged since start"
	}
	if y.FrequencyEstimates > 0 {
		line += fmt.Sprintf(" (%d estimates)", y.FrequencyEstimates)
	}
	return line
}

// kernelLine is the sync state the daemon last told the kernel.
func kernelLine(k *control.KernelSync) string {
	var line string
	switch {
	case k.At.IsZero():
		line = "not told yet"
	case k.Synchronised:
		line = fmt.Sprintf("told synchronised %s ago (STA_UNSYNC clear), maxerror %s, esterror %s", secs(k.AgeSecs), magnitude(k.MaxErrorSecs), magnitude(k.EstErrorSecs))
	default:
		line = fmt.Sprintf("told unsynchronised %s ago (STA_UNSYNC set)", secs(k.AgeSecs))
	}
	if k.Error != "" {
		line += "; the last telling failed: " + k.Error
	}
	return line
}

// networkLine is one network: where, and this host's role there: its
// state, the master it follows there, its slaves where it is master, and
// "slavenet" on the one network its clock takes its time from.
func networkLine(n control.Network) string {
	where := "peers, listening on " + n.Address
	switch {
	case n.Group != "":
		where = fmt.Sprintf("%s %s on %s, group %s (%s)", n.Interface, n.Address, n.Prefix, n.Group, n.Note)
	case n.Interface != "":
		where = fmt.Sprintf("%s %s on %s, broadcast %s", n.Interface, n.Address, n.Prefix, n.Broadcast)
	}
	if n.State == "" {
		return where // a daemon from before per-network roles
	}
	r := where + ": " + n.State
	switch {
	case n.State == "master":
		r += fmt.Sprintf(" of %d slaves", len(n.Slaves))
		if n.RoundIntervalSecs > 0 {
			r += fmt.Sprintf(", a round every %v", time.Duration(n.RoundIntervalSecs*float64(time.Second)).Round(time.Millisecond))
		}
	case n.Master != nil:
		r += fmt.Sprintf(", master %s (%s)", n.Master.Name, n.Master.Address)
	}
	if n.Slavenet {
		r += ", slavenet"
	}
	if n.Link != "" {
		r += " [" + n.Link + "]"
	}
	return r
}

// sourcesText is the sources as a table, chronyc's kind.
func sourcesText(s *control.Sources) string {
	if len(s.Sources) == 0 {
		return s.Hostname + " has no sources: no slaves to measure, no master to follow"
	}
	nets := map[string]bool{}
	for _, src := range s.Sources {
		nets[src.Network] = true
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	head := "NAME\tADDRESS\tROLE\tSTATE\tREACH\tOFFSET\tERROR\tRTT\tAGE\tMETHOD\tSTAMPS"
	if len(nets) > 1 {
		head += "\tNETWORK"
	}
	fmt.Fprintln(tw, head)
	opt := func(v *float64, f func(float64) string) string {
		if v == nil {
			return "-"
		}
		return f(*v)
	}
	for _, src := range s.Sources {
		role := src.Role
		if src.ReferenceMaxErrorSecs != nil {
			role += " (UTC reference ±" + magnitude(*src.ReferenceMaxErrorSecs) + ")"
		}
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%o\t%s\t%s\t%s\t%s\t%s\t%s", src.Name, src.Address, role, src.State, src.Reach,
			opt(src.OffsetSecs, offsetStr), opt(src.ErrorBoundSecs, func(f float64) string { return "±" + magnitude(f) }),
			opt(src.RTTSecs, magnitude), opt(src.AgeSecs, secs), orDash(src.Method), orDash(src.Stamps))
		if len(nets) > 1 {
			line += "\t" + src.Network
		}
		fmt.Fprintln(tw, line)
	}
	_ = tw.Flush() // into a strings.Builder: cannot fail
	return strings.TrimSuffix(b.String(), "\n")
}

// offsetStr is a signed offset in ms, or s from a second on.
func offsetStr(f float64) string {
	if math.Abs(f) >= 1 {
		return fmt.Sprintf("%+.3f s", f)
	}
	return fmt.Sprintf("%+.3f ms", f*1e3)
}

// magnitude is an unsigned duration (an error bound, a round trip) the
// same way.
func magnitude(f float64) string {
	if math.Abs(f) >= 1 {
		return fmt.Sprintf("%.3f s", f)
	}
	return fmt.Sprintf("%.3f ms", f*1e3)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "(not said)"
	}
	return s
}

func secs(f float64) string {
	return time.Duration(f * float64(time.Second)).Round(time.Millisecond).String()
}

func counters(m map[string]control.Counter) string {
	return joinSorted(m, "(rx/tx) ", func(k string, c control.Counter) string { return fmt.Sprintf("%s %d/%d", k, c.Rx, c.Tx) })
}

func drops(m map[string]uint64) string {
	return joinSorted(m, "", func(k string, n uint64) string { return fmt.Sprintf("%s %d", k, n) })
}

// joinSorted formats a map's entries in key order after prefix, or "none".
func joinSorted[V any](m map[string]V, prefix string, format func(string, V) string) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, format(k, m[k]))
	}
	return prefix + strings.Join(parts, ", ")
}
