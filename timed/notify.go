package timed

import (
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

// systemd integration (Type=notify): READY=1 once the election runs,
// STATUS= with the state and master on every change, WATCHDOG=1 from the
// loop itself, so a wedged loop gets the daemon restarted. Outside
// systemd (no NOTIFY_SOCKET) every call is a no-op.

func notifyReady(d *Daemon) {
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)
	notifyStatus(d)
}

// notifyStatus tells each network's state, "; " between networks, and
// the max-step alarm when it is on.
func notifyStatus(d *Daemon) {
	parts := make([]string, len(d.runtimes))
	for i, rt := range d.runtimes {
		status := rt.state()
		if m, ok := d.host.Master(rt.i); ok && m.Name != d.hostname {
			status += ", master " + m.Name
		}
		if d.host.IsSlaveNet(rt.i) && len(d.runtimes) > 1 {
			status += " (slavenet)"
		}
		parts[i] = fmt.Sprintf("%s on %s", status, rt.network)
	}
	if a := d.applier.Alarm(); a.On {
		parts = append(parts, fmt.Sprintf("ALARM: clock %+.3fs from network time, beyond max-step (timedc step)", a.Offset.Seconds()))
	}
	_, _ = daemon.SdNotify(false, "STATUS="+strings.Join(parts, "; "))
}

func notifyWatchdog(*Daemon) { _, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog) }

func notifyStopping() { _, _ = daemon.SdNotify(false, daemon.SdNotifyStopping) }

// watchdog ticks at half the interval systemd asked for, or never.
type watchdog struct{ t *time.Ticker }

func newWatchdog() watchdog {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil || interval <= 0 {
		return watchdog{}
	}
	return watchdog{time.NewTicker(interval / 2)}
}

// C is the tick channel; nil (never ready) without a watchdog.
func (w watchdog) C() <-chan time.Time {
	if w.t == nil {
		return nil
	}
	return w.t.C
}

func (w watchdog) Stop() {
	if w.t != nil {
		w.t.Stop()
	}
}
