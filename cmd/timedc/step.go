package main

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/timed/control"
)

func stepCmd(o *options) *cobra.Command {
	var toNetwork bool
	cmd := &cobra.Command{
		Use:   "step DURATION | step --to-network",
		Short: "step the local daemon's clock by DURATION (e.g. -4995s), whatever max-step says (control socket)",
		Long: `step moves the local daemon's clock at once by DURATION, a Go duration
such as -4995s or 1h30m, ignoring max-step, and ends the max-step alarm.
With --to-network it steps by the offset from network time the alarm
reports (timedc status). Anyone who may write to the control socket may
step the clock: the socket's mode (0660) is the access control.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := control.Request{Cmd: control.CmdStep, ToNetwork: toNetwork}
			switch {
			case toNetwork && len(args) > 0:
				return errors.New("step: give a DURATION or --to-network, not both")
			case !toNetwork && len(args) == 0:
				return errors.New("step: give a DURATION (e.g. -4995s) or --to-network")
			case len(args) == 1:
				d, err := time.ParseDuration(args[0])
				if err != nil {
					return fmt.Errorf("step: %q is not a Go duration such as -4995s: %w", args[0], err)
				}
				if err := control.CheckStep(d); err != nil {
					return err
				}
				req.Step = d.String()
			}
			return o.local(cmd.Context(), req, "saying what it stepped", func(resp *control.Response) (any, string, bool) {
				if resp.Step == nil {
					return nil, "", false
				}
				return resp.Step, stepText(resp.Step), true
			})
		},
	}
	cmd.Flags().BoolVar(&toNetwork, "to-network", false, "step by the offset from network time the max-step alarm reports")
	return cmd
}

func stepText(s *control.StepResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "clock stepped by %+.6f s at %s", s.Correction.Secs, s.Correction.At.Format(time.RFC3339))
	if a := s.AlarmWas; a != nil {
		fmt.Fprintf(&b, "; alarm since %s ended (%d corrections refused)", a.Since.Format(time.RFC3339), a.Refused)
	}
	if s.OffsetBeforeSecs != nil && s.OffsetAfterSecs != nil {
		fmt.Fprintf(&b, "\nsimulated clock offset %+.6f s -> %+.6f s", *s.OffsetBeforeSecs, *s.OffsetAfterSecs)
	}
	return b.String()
}

// negativeNumber is an argument such as -4995s, -1.5h or -5 (which
// ParseDuration then refuses for its missing unit).
var negativeNumber = regexp.MustCompile(`^-[0-9.]`)

// negativesAsArguments moves negative durations (timedc step -4995s)
// behind a "--", where the flag parser takes them for the arguments they
// are, not for short flags. No flag of timedc starts with a digit. Args
// that have a "--" already are left as they are.
func negativesAsArguments(args []string) []string {
	if slices.Contains(args, "--") {
		return args
	}
	var rest, negatives []string
	for _, a := range args {
		if negativeNumber.MatchString(a) {
			negatives = append(negatives, a)
			continue
		}
		rest = append(rest, a)
	}
	if len(negatives) == 0 {
		return rest
	}
	return append(append(rest, "--"), negatives...)
}
