package main

import (
	"context"
	"fmt"
	"maps"
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
	return &cobra.Command{
		Use:   "status",
		Short: "show the local daemon's state, master, slaves and counters (control socket)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.local(cmd.Context(), control.Request{Cmd: control.CmdStatus}, "a status",
				func(resp *control.Response) (any, string, bool) {
					if resp.Status == nil {
						return nil, "", false
					}
					return resp.Status, statusText(resp.Status), true
				})
		},
	}
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

// statusText is status for a person: the alarm first, then state,
// clock, networks, the slaves' table and the counters.
func statusText(s *control.Status) string {
	var b strings.Builder
	if a := s.Alarm; a != nil {
		// First, so that no one reads past it.
		fmt.Fprintf(&b, "ALARM since %s: clock %+.3f s from network time, beyond max-step %s; it moves back by max-step a round at most, "+
			"%d corrections refused; `timedc step --to-network` steps it now\n",
			a.Since.Format(time.RFC3339), a.OffsetSecs, secs(a.MaxStepSecs), a.Refused)
	}
	fmt.Fprintf(&b, "%s is %s for %s", s.Hostname, s.State, secs(s.InStateSecs))
	if s.Master != nil && s.State != "master" {
		fmt.Fprintf(&b, "; master %s (%s)", s.Master.Name, s.Master.Address)
	}
	fmt.Fprintf(&b, "\nclock %s, frequency %+.3f ppm", s.Clock, s.FrequencyPPM)
	if c := s.LastCorrection; c != nil {
		fmt.Fprintf(&b, ", last correction %s %+.6f s at %s", c.Kind, c.Secs, c.At.Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "\nelections seen %d", s.Elections)
	if s.LastElection > 0 {
		fmt.Fprintf(&b, ", last took %s", secs(s.LastElection))
	}
	for _, n := range s.Networks {
		if n.Interface == "" {
			fmt.Fprintf(&b, "\nnetwork: peers, listening on %s%s", n.Address, networkRole(n))
			continue
		}
		fmt.Fprintf(&b, "\nnetwork %s: %s on %s, broadcast %s%s", n.Interface, n.Address, n.Prefix, n.Broadcast, networkRole(n))
	}
	b.WriteString("\n")
	if len(s.Slaves) > 0 {
		tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nSLAVE\tADDRESS\tOFFSET\tERROR\tRTT\tLAST SEEN")
		for _, sl := range s.Slaves {
			fmt.Fprintf(tw, "%s\t%s\t%+.3f ms\t±%.3f ms\t%.3f ms\t%s\n", sl.Name, sl.Address,
				sl.OffsetSecs*1e3, sl.ErrorBoundSecs*1e3, sl.RTTSecs*1e3, sl.LastSeen.Format(time.TimeOnly))
		}
		_ = tw.Flush() // into a strings.Builder: cannot fail
	}
	fmt.Fprintf(&b, "\npackets %s\ndrops %s", counters(s.Packets), drops(s.Drops))
	return b.String()
}

// networkRole is the daemon's role on one network, for its line: its
// state, the master it follows there, its slaves where it is master, and
// "slavenet" on the one network its clock takes its time from.
func networkRole(n control.Network) string {
	if n.State == "" {
		return "" // a daemon from before per-network roles
	}
	r := ": " + n.State
	switch {
	case n.State == "master":
		r += fmt.Sprintf(", %d slaves", len(n.Slaves))
	case n.Master != nil:
		r += fmt.Sprintf(" of %s (%s)", n.Master.Name, n.Master.Address)
	}
	if n.Slavenet {
		r += ", slavenet"
	}
	return r
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
