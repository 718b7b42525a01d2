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

func statusCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "show the local daemon's state, master, slaves and counters (control socket)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), o.wait(5*time.Second))
			defer cancel()
			resp, err := control.Call(ctx, o.controlSocket, control.Request{Cmd: control.CmdStatus})
			if err != nil {
				return err
			}
			if resp.Status == nil {
				return fmt.Errorf("timed at %s answered without a status", o.controlSocket)
			}
			if o.json {
				return o.emit(resp.Status, "")
			}
			return printStatus(o, resp.Status)
		},
	}
}

func printStatus(o *options, s *control.Status) error {
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
			fmt.Fprintf(&b, "\nnetwork: peers, listening on %s", n.Address)
			continue
		}
		fmt.Fprintf(&b, "\nnetwork %s: %s on %s, broadcast %s", n.Interface, n.Address, n.Prefix, n.Broadcast)
	}
	b.WriteString("\n")
	if _, err := fmt.Fprint(o.out, b.String()); err != nil {
		return err
	}
	if len(s.Slaves) > 0 {
		tw := tabwriter.NewWriter(o.out, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "\nSLAVE\tADDRESS\tOFFSET\tERROR\tRTT\tLAST SEEN")
		for _, sl := range s.Slaves {
			fmt.Fprintf(tw, "%s\t%s\t%+.3f ms\t±%.3f ms\t%.3f ms\t%s\n", sl.Name, sl.Address,
				sl.OffsetSecs*1e3, sl.ErrorBoundSecs*1e3, sl.RTTSecs*1e3, sl.LastSeen.Format(time.TimeOnly))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(o.out, "\npackets %s\ndrops %s\n", counters(s.Packets), drops(s.Drops))
	return err
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
