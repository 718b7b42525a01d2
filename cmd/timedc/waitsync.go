package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/timed/control"
)

// Exit codes of timedc. Every failure exits 1, but for waitsync's two
// ways of not getting what it waited for, which a unit or a script may
// want to tell apart (README, "Waiting for synchronisation").
const (
	exitFailed = 1
	// exitNotSynced: the daemon answered, but was not synchronised
	// (within --max-offset) when --timeout ran out, or never will be (a
	// dry-run clock).
	exitNotSynced = 2
	// exitNoDaemon: no daemon answered on the control socket until
	// --timeout ran out (not running, not answering).
	exitNoDaemon = 3
)

// exitError is an error with its own exit code (main).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// exitCode is the process's exit code for err.
func exitCode(err error) int {
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return exitFailed
}

func waitsyncCmd(o *options) *cobra.Command {
	var w waitFor
	cmd := &cobra.Command{
		Use:   "waitsync",
		Short: "wait until the local daemon says its clock is synchronised, as chronyc waitsync does (control socket)",
		Long: `waitsync asks the local daemon every --interval whether its clock is synchronised
(the judgement timedc status shows on its first line) and returns as soon as it is:
exit 0. With --max-offset it also waits until the estimated offset from network
time plus its error bound is within that (a slave, whose error bound its master
alone knows, compares its offset alone). --timeout bounds the whole wait; without
it (or 0) waitsync waits for ever, as chronyc waitsync without max-tries.

Exit codes: 0 synchronised; 1 an error that waiting cannot mend (bad flags, the
control socket refuses this user: the answer says which group to join); 2 the
daemon answered but was not synchronised (or not within --max-offset) when
--timeout ran out, or never will be (a dry-run clock); 3 no daemon answered on the
control socket until --timeout ran out. The reason is printed in every case, the
daemon's last one with 2; --json prints an array of one object, as timedc status does.
timed-wait.service runs it at boot to hold time-sync.target until the clock is set.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.waitsync(cmd.Context(), w)
		},
	}
	cmd.Flags().DurationVar(&w.maxOffset, "max-offset", 0, "also wait until |offset| + error bound is within this (0: any offset)")
	cmd.Flags().DurationVar(&w.interval, "interval", time.Second, "how often to ask the daemon (at least 100ms)")
	return cmd
}

// waitFor is what waitsync waits for, and how often it asks.
type waitFor struct {
	maxOffset time.Duration
	interval  time.Duration
}

// syncPoll is one answer to waitsync's question.
type syncPoll struct {
	sync  *control.Sync // nil: no answer
	met   bool          // synchronised, within max-offset
	why   string        // why not, or the daemon's reason when met
	code  int           // why not: exitNotSynced or exitNoDaemon
	final bool          // waiting will not change the answer
}

// waitsync polls the daemon until it is synchronised, and prints the
// last answer as forEachHost's (localHost).
func (o *options) waitsync(ctx context.Context, w waitFor) error {
	switch {
	case w.interval < minWatchInterval:
		return fmt.Errorf("--interval %v: at least %v", w.interval, minWatchInterval)
	case w.maxOffset < 0:
		return fmt.Errorf("--max-offset %v: 0 (any offset) or more", w.maxOffset)
	case o.timeout < 0:
		return fmt.Errorf("--timeout %v: 0 (wait for ever) or more", o.timeout)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	wait := ctx
	if o.timeout > 0 {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	code := 0
	err := o.forEachHost([]string{localHost}, func(string) (string, map[string]any, error) {
		start := time.Now()
		tick := time.NewTicker(w.interval)
		defer tick.Stop()
		// expired: the deadline has passed (the context's timer may not
		// have fired yet when a call's own deadline did).
		expired := func() bool {
			dl, ok := wait.Deadline()
			return wait.Err() != nil || ok && !time.Now().Before(dl)
		}
		var last syncPoll
		polls := 0
		for {
			p := o.pollSync(wait, w.maxOffset)
			if polls == 0 || !expired() {
				// A call cut short by the deadline says nothing new.
				last = p
			}
			polls++
			if p.met || p.final || expired() {
				break
			}
			select {
			case <-wait.Done():
			case <-tick.C:
			}
			if expired() {
				break
			}
		}
		waited := time.Since(start)
		fields := map[string]any{"synchronised": last.met, "waited_seconds": waited.Seconds(), "polls": polls,
			"control_socket": o.controlSocket, "reason": last.why}
		if w.maxOffset > 0 {
			fields["max_offset_seconds"] = w.maxOffset.Seconds()
		}
		if y := last.sync; y != nil {
			fields["state"] = y.State
			if y.OffsetSecs != nil {
				fields["offset_seconds"] = *y.OffsetSecs
			}
			if y.ErrorBoundSecs != nil {
				fields["error_bound_seconds"] = *y.ErrorBoundSecs
			}
		}
		if last.met {
			line := fmt.Sprintf("synchronised after %s: %s", secs(waited.Seconds()), last.why)
			if last.sync.OffsetSecs != nil {
				line += "; offset " + offsetLine(last.sync)
			}
			return line, fields, nil
		}
		code = last.code
		switch {
		case last.final:
			return "", fields, errors.New(last.why)
		case last.code == exitNoDaemon:
			return "", fields, fmt.Errorf("no answer from timed after %s: %s", secs(waited.Seconds()), last.why)
		}
		return "", fields, fmt.Errorf("not synchronised after %s: %s", secs(waited.Seconds()), last.why)
	})
	if err != nil && code != 0 {
		return &exitError{code, err}
	}
	return err
}

// pollTimeout bounds each question (--timeout bounds the whole wait).
const pollTimeout = 5 * time.Second

// pollSync asks the daemon once, within ctx and pollTimeout.
func (o *options) pollSync(ctx context.Context, maxOffset time.Duration) syncPoll {
	ctx, cancel := context.WithTimeout(ctx, pollTimeout)
	defer cancel()
	resp, err := o.call(ctx, control.Request{Cmd: control.CmdStatus})
	switch {
	case errors.Is(err, fs.ErrPermission):
		// The socket refuses us: it will go on refusing.
		return syncPoll{why: err.Error(), code: exitFailed, final: true}
	case err != nil && resp != nil:
		return syncPoll{why: err.Error(), code: exitFailed, final: true} // the daemon refused the question
	case err != nil:
		return syncPoll{why: err.Error(), code: exitNoDaemon}
	case resp.Status == nil || resp.Status.Sync == nil:
		return syncPoll{why: "timed at " + o.controlSocket + " does not say whether it is synchronised (a daemon older than timedc?)", code: exitFailed, final: true}
	}
	y := resp.Status.Sync
	p := syncPoll{sync: y, why: y.State + ": " + y.Reason, code: exitNotSynced}
	switch {
	case resp.Status.Clock == "dry-run":
		p.why, p.final = "timed runs a dry-run clock (--clock dry-run): it never corrects the clock, so it is never synchronised", true
	case y.State != control.Synchronised:
	case maxOffset <= 0:
		p.met, p.why = true, y.Reason
	case y.OffsetSecs == nil:
		p.why = "synchronised, but the offset from network time is not known yet, and --max-offset asks for it"
	default:
		dist := math.Abs(*y.OffsetSecs)
		if y.ErrorBoundSecs != nil {
			dist += *y.ErrorBoundSecs
		}
		if dist <= maxOffset.Seconds() {
			p.met, p.why = true, y.Reason
		} else {
			p.why = fmt.Sprintf("synchronised, but %s: %s from it at most, beyond --max-offset %v", offsetLine(y), magnitude(dist), maxOffset)
		}
	}
	return p
}
