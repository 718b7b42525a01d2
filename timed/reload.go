package timed

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/config"
)

// reload applies, on the loop, what SIGHUP may change: the log level,
// tracing and the trusted hosts. Everything else needs a restart; the
// error names each such key that changed, and the rest is still applied.
func (d *Daemon) reload(next *config.Config) error {
	old := d.cfg
	if next.LogLevel != old.LogLevel {
		d.log.SetLevel(next.LogLevel)
	}
	if next.Trace != old.Trace {
		d.setTrace(next.Trace)
	}
	// A trusted list that does not resolve keeps the old one in force.
	var trustErr error
	trustedNames := old.Trusted
	if !reflect.DeepEqual(next.Trusted, old.Trusted) {
		if err := d.applyTrusted(next.Trusted); err != nil {
			trustErr = fmt.Errorf("not reloaded, the old list stays: %w", err)
		} else {
			trustedNames = next.Trusted
		}
	}
	var restart []string
	check := func(key string, a, b any) {
		if !reflect.DeepEqual(a, b) {
			restart = append(restart, key)
		}
	}
	check("master", old.MayBeMaster, next.MayBeMaster)
	check("port", old.Port, next.Port)
	check("hostname", old.Hostname, next.Hostname)
	check("interfaces", old.Interfaces, next.Interfaces)
	check("networks", old.Networks, next.Networks)
	check("ignore-networks", old.IgnoreNetworks, next.IgnoreNetworks)
	check("peers", old.Peers, next.Peers)
	check("family", old.Family, next.Family)
	check("ipv6-group", old.IPv6Group, next.IPv6Group)
	check("clock", old.Clock, next.Clock)
	check("control-socket", old.ControlSocket, next.ControlSocket)
	check("log-format", old.LogFormat, next.LogFormat)
	check("metrics-listen", old.MetricsListen, next.MetricsListen)
	// Timers and sync settings: compare without the fields reloaded above.
	oe, ne := old.Election, next.Election
	oe.Trusted, ne.Trusted = nil, nil
	check("timers", oe, ne)
	check("sync settings", old.Sync, next.Sync)
	check("auth settings", old.Auth, next.Auth)

	// Keep the values that were not applied, so the next reload compares
	// against what is really running.
	applied := *old
	applied.LogLevel, applied.Trace, applied.Trusted = next.LogLevel, next.Trace, trustedNames
	d.cfg = &applied
	d.log.WithFields(logrus.Fields{"log_level": next.LogLevel.String(), "trace": next.Trace,
		"trusted": strings.Join(trustedNames, ",")}).Info("configuration reloaded")
	if len(restart) > 0 {
		return errors.Join(trustErr, fmt.Errorf("not reloaded, restart timed to change: %s", strings.Join(restart, ", ")))
	}
	return trustErr
}
