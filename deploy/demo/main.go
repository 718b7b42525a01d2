// Command demo runs timed's main job on one machine: five daemons on
// 127.0.0.1 in peers mode on unprivileged ports, each on a simulated
// clock up to ±2 s off (no real clock is touched, no root needed). It
// says "electing…" until there is one master, then prints every daemon's
// state, master, sync state and clock offset as the clocks converge, and
// stops them all on Ctrl-C or after --duration.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/timed-project/timed/timed/control"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding timed and timedc")
	n := flag.Int("n", 5, "number of daemons")
	base := flag.Int("port", 15250, "first UDP port")
	duration := flag.Duration("duration", 0, "stop after this long (0: until Ctrl-C)")
	every := flag.Duration("every", time.Second, "how often to print")
	logs := flag.String("logs", "", "keep the daemons' logs in this directory (default: a temporary one, removed)")
	flag.Parse()
	if err := run(*bin, *n, *base, *duration, *every, *logs); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

type daemon struct {
	name, sock, log string
	offset          time.Duration
	cmd             *exec.Cmd
	done            chan error
}

func run(bin string, n, base int, duration, every time.Duration, logs string) error {
	if n < 1 || n > 50 {
		return fmt.Errorf("-n %d: accepted: 1 to 50", n)
	}
	dir := logs
	if dir == "" {
		tmp, err := os.MkdirTemp("", "timed-demo")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var peers []string
	for i := range n {
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(base+i))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}

	var ds []*daemon
	defer func() { stopAll(ds) }()
	for i := range n {
		// Offsets spread over ±2 s, drifts over ±50 ppm: a bad LAN's clocks.
		off := time.Duration(-2000+4000*i/max(n-1, 1)) * time.Millisecond
		d := &daemon{name: fmt.Sprintf("host%d", i+1), offset: off,
			sock: filepath.Join(dir, fmt.Sprintf("host%d.sock", i+1)), log: filepath.Join(dir, fmt.Sprintf("host%d.log", i+1))}
		logf, err := os.Create(d.log)
		if err != nil {
			return err
		}
		d.cmd = exec.Command(filepath.Join(bin, "timed"), "-M", "--profile", "fast",
			"--port", strconv.Itoa(base+i), "--hostname", d.name, "--peers", strings.Join(peers, ","),
			"--clock", fmt.Sprintf("sim:offset=%+dms,drift=%+dppm", off.Milliseconds(), 50-100*i/max(n-1, 1)),
			"--control-socket", d.sock)
		d.cmd.Stdout, d.cmd.Stderr = logf, logf
		if err := d.cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("start %s: %w (run `make build` first)", d.name, err)
		}
		logf.Close()
		d.done = make(chan error, 1)
		go func() { d.done <- d.cmd.Wait() }()
		ds = append(ds, d)
	}
	fmt.Printf("started %d daemons on 127.0.0.1:%d-%d (logs in %s); Ctrl-C stops them\n\n", n, base, base+n-1, dir)

	tick := time.NewTicker(every)
	defer tick.Stop()
	start := time.Now()
	for {
		if err := show(ds, time.Since(start)); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			fmt.Println("\nstopping")
			return nil
		case <-tick.C:
		}
	}
}

// show prints one line: while the daemons are electing (or starting),
// "electing…" and each one's state; once there is one master and every
// other daemon is its slave, each daemon's state, master, sync state and
// clock offset from the kernel clock, then the largest pairwise offset.
func show(ds []*daemon, elapsed time.Duration) error {
	sts := make([]*control.Status, len(ds))
	for i, d := range ds {
		select {
		case err := <-d.done:
			return fmt.Errorf("%s exited: %v (see %s)", d.name, err, d.log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		resp, err := control.Call(ctx, d.sock, control.Request{Cmd: control.CmdStatus})
		cancel()
		if err == nil {
			sts[i] = resp.Status
		}
	}
	fmt.Printf("t=%-6v", elapsed.Round(time.Second))
	if _, ok := oneMaster(sts); !ok {
		fmt.Printf(" | electing… %s\n", states(ds, sts))
		return nil
	}
	lo, hi := sts[0].OffsetSecs, sts[0].OffsetSecs
	cells := make([]string, len(ds))
	for i, s := range sts {
		role := s.State
		if s.Master != nil && s.State != "master" {
			role += "→" + s.Master.Name
		}
		sync := "?"
		if s.Sync != nil {
			sync = map[string]string{control.Synchronised: "sync", control.Unsynchronised: "unsync", control.InAlarm: "ALARM"}[s.Sync.State]
		}
		cells[i] = fmt.Sprintf("%s %-14s %-6s %+9.3fms", ds[i].name, role, sync, s.OffsetSecs*1e3)
		lo, hi = min(lo, s.OffsetSecs), max(hi, s.OffsetSecs)
	}
	fmt.Printf(" | %s | spread %.3f ms\n", strings.Join(cells, " | "), (hi-lo)*1e3)
	return nil
}

// oneMaster is the master's name when exactly one daemon is master and
// every other one answered and is its slave.
func oneMaster(sts []*control.Status) (string, bool) {
	master := ""
	for _, s := range sts {
		switch {
		case s == nil:
			return "", false
		case s.State == "master" && master != "":
			return "", false
		case s.State == "master":
			master = s.Hostname
		}
	}
	if master == "" {
		return "", false
	}
	for _, s := range sts {
		if s.State != "master" && (s.State != "slave" || s.Master == nil || s.Master.Name != master) {
			return "", false
		}
	}
	return master, true
}

// states is each daemon's state, "starting" for one not answering yet.
func states(ds []*daemon, sts []*control.Status) string {
	parts := make([]string, len(ds))
	for i, s := range sts {
		state := "starting"
		if s != nil {
			state = s.State
		}
		parts[i] = ds[i].name + " " + state
	}
	return strings.Join(parts, ", ")
}

// stopAll sends SIGTERM and waits; a daemon stops within a second.
func stopAll(ds []*daemon) {
	for _, d := range ds {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, d := range ds {
		select {
		case <-d.done:
		case <-time.After(3 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
}
