package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/election/ring"
	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/tsp"
)

func ringCmd(o *options) *cobra.Command {
	cmd := &cobra.Command{Use: "ring", Short: "run the classic ring election algorithms among the running daemons"}
	var alg string
	var unit time.Duration
	elect := &cobra.Command{
		Use:   "elect [host]",
		Short: "start a ring election among the daemons the host reaches, and print the leader, messages, bits and time",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			host := "localhost"
			if len(args) == 1 {
				host = args[0]
			}
			return o.forEachHost([]string{host}, func(h string) (string, map[string]any, error) {
				res, err := ringElect(o, h, alg, unit)
				if err != nil {
					return "", nil, err
				}
				fields, ferr := fieldsOf(res)
				if res.Error != "" {
					delete(fields, "error") // forEachHost writes it
					return "", fields, fmt.Errorf("ring election (%s): %s", res.Algorithm, res.Error)
				}
				return fmt.Sprintf("leader %s (id %d) elected by %s among %d daemons: %d messages (bound %.0f), %d bits, %.3f s",
					res.Leader, res.LeaderID, res.Algorithm, res.N, res.Messages, res.Bound, res.Bits, res.Seconds), fields, ferr
			})
		},
	}
	elect.Flags().StringVar(&alg, "algorithm", "chang-roberts", "algorithm (see timedc ring algorithms)")
	elect.Flags().DurationVar(&unit, "unit", live.DefaultUnit, "bound on one link delay; a tick of the algorithms' clocks is two")
	list := &cobra.Command{
		Use:   "algorithms",
		Short: "list the algorithms with their topology and message bound",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			// Not an answer from a host: rows without "host", but with
			// schema_version as every object timedc prints.
			type row struct {
				Name          string `json:"name"`
				Topology      string `json:"topology"`
				Elects        string `json:"elects"`
				Bound         string `json:"bound"`
				Live          bool   `json:"live"`
				SchemaVersion int    `json:"schema_version"`
			}
			var rows []row
			for _, a := range ring.All() {
				rows = append(rows, row{a.Name, topologyName(a.Topology), extremumName(a.Elects), a.BoundText, !a.HalfDuplex, schemaVersion})
			}
			if o.json {
				return o.emit(rows, "")
			}
			tw := tabwriter.NewWriter(o.out, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ALGORITHM\tTOPOLOGY\tELECTS\tLIVE\tMESSAGE BOUND")
			for _, r := range rows {
				live := "yes"
				if !r.Live {
					live = "sim only (half-duplex links)"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Name, r.Topology, r.Elects, live, r.Bound)
			}
			return tw.Flush()
		},
	}
	cmd.AddCommand(elect, list)
	return cmd
}

func topologyName(t ring.Topology) string {
	return map[ring.Topology]string{ring.Unidirectional: "unidirectional ring", ring.Bidirectional: "bidirectional ring", ring.Complete: "complete network"}[t]
}

func extremumName(e ring.Extremum) string {
	return map[ring.Extremum]string{ring.Max: "max id", ring.Min: "min id", ring.Any: "any"}[e]
}

// ringElect asks the daemon at host to coordinate an election and waits
// for its result.
func ringElect(o *options, host, alg string, unit time.Duration) (*live.Result, error) {
	addr, err := o.resolve(host)
	if err != nil {
		return nil, err
	}
	seq := uint16(rand.Uint32())
	req, err := live.ElectPacket(ownName(), seq, alg, unit)
	if err != nil {
		return nil, err
	}
	b, err := req.Marshal()
	if err != nil {
		return nil, err
	}
	var res *live.Result
	err = o.roundTrip(context.Background(), addr, b, o.wait(90*time.Second), func(d []byte) bool {
		e, err := tsp.UnmarshalExt(d)
		if err != nil {
			return false
		}
		var ok bool
		res, ok = live.ResultOf(e, seq)
		return ok
	})
	if err != nil {
		return nil, fmt.Errorf("ring election: %w", err)
	}
	if res.Leader == "" && res.Error == "" {
		res.Error = "no leader"
	}
	return res, nil
}
