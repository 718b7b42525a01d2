package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// watchFlags are --watch and --interval, for the commands that redraw.
type watchFlags struct {
	on       bool
	interval time.Duration
}

// minWatchInterval bounds --interval: each redraw is a round trip to the
// daemon's loop.
const minWatchInterval = 100 * time.Millisecond

func (w *watchFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&w.on, "watch", false, "redraw every --interval until Ctrl-C; with --json, one JSON document per line")
	cmd.Flags().DurationVar(&w.interval, "interval", time.Second, "with --watch: how often to redraw (at least 100ms)")
}

// clearScreen moves the cursor home and clears the terminal (ANSI).
const clearScreen = "\x1b[H\x1b[2J"

// watchOr runs once, or with --watch every interval until Ctrl-C (or
// ctx's end): on a terminal (o.screen) the screen is cleared before each
// redraw; elsewhere a separator line with the time comes between them.
// With --json each answer is one line (JSON Lines). Each redraw asks the
// daemon afresh, on a new connection, so a daemon restarted meanwhile is
// picked up; its failures are shown and the watch goes on.
func (o *options) watchOr(ctx context.Context, w watchFlags, once func() error) error {
	if !w.on {
		return once()
	}
	if w.interval < minWatchInterval {
		return fmt.Errorf("--interval %v: at least %v", w.interval, minWatchInterval)
	}
	if ctx == nil {
		ctx = context.Background()
	}
	stopped, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.compact = true
	defer func() { o.compact = false }()
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	for i := 0; ; i++ {
		switch {
		case o.json:
		case o.screen != nil:
			_, _ = io.WriteString(o.screen, clearScreen) // raw: o.out escapes control characters
		case i > 0:
			fmt.Fprintf(o.out, "\n---- %s\n", time.Now().Format(time.TimeOnly))
		}
		if err := once(); err != nil && !o.json {
			fmt.Fprintln(o.out, "timedc:", err) // --json printed it in the answer
		}
		select {
		case <-stopped.Done():
			return nil
		case <-tick.C:
		}
	}
}

// isTerminal reports whether f looks like a terminal: a character
// device (so also /dev/null, which a clear sequence does not harm).
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
