package netbench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// MaxLoad bounds the busy loops of a Load: a few per core is load
// enough, and more only slows the host's own shell.
const MaxLoad = 64

// Load is CPU load beside the daemons: busy-loop processes at the
// daemons' priority, each a shell spinning on `:` in the host's
// namespaces, competing with them for the cores as any busy program
// would. It is the benchmark's load test for issue 20 ("short rounds
// break at N = 150 under load": two busy processes on a 2-core host).
//
// Busy loops rather than a CPU quota on the daemons: they need nothing
// of the host (no cgroup v2 cpu controller, which hybrid hierarchies
// such as this project's machine lack), and they load the kernel's
// packet path (softirqs run on the loaded cores) as well as the
// daemons.
type Load struct {
	procs []*exec.Cmd
}

// CheckLoad accepts 0 (no load) to MaxLoad busy loops.
func CheckLoad(n int) error {
	if n < 0 || n > MaxLoad {
		return fmt.Errorf("%d busy loops: accepted 0 to %d", n, MaxLoad)
	}
	return nil
}

// StartLoad starts n busy loops. They die with the caller (SIGKILL on
// parent death) if it never calls Stop. On error the loops already
// started are stopped.
func StartLoad(n int) (*Load, error) {
	l := &Load{}
	if err := CheckLoad(n); err != nil {
		return l, err
	}
	for range n {
		cmd := exec.Command("/bin/sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			return l, errors.Join(fmt.Errorf("busy loop: %w", err), l.Stop())
		}
		l.procs = append(l.procs, cmd)
	}
	return l, nil
}

// N is how many busy loops run.
func (l *Load) N() int { return len(l.procs) }

// Stop kills the busy loops (by their own process ids) and reaps them.
func (l *Load) Stop() error {
	var errs []error
	for _, c := range l.procs {
		if err := c.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			errs = append(errs, fmt.Errorf("busy loop %d: %w", c.Process.Pid, err))
		}
		_ = c.Wait() // killed: the error is the signal
	}
	l.procs = nil
	return errors.Join(errs...)
}
