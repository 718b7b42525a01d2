package timed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/timed/control"
)

// ctlCall carries a control request into the loop and its answer back.
type ctlCall struct {
	req   control.Request
	reply chan control.Response
}

type reloadCall struct {
	cfg   *config.Config
	reply chan error
}

// errStopped answers calls that arrive while the daemon shuts down.
var errStopped = errors.New("timed is stopping")

// handleControl runs on a control connection's goroutine: it asks the loop
// and waits for the answer.
func (d *Daemon) handleControl(ctx context.Context, req control.Request) control.Response {
	c := ctlCall{req: req, reply: make(chan control.Response, 1)}
	select {
	case d.ctlCh <- c:
	case <-ctx.Done():
		return control.Response{Error: errStopped.Error()}
	}
	select {
	case r := <-c.reply:
		return r
	case <-ctx.Done():
		return control.Response{Error: errStopped.Error()}
	}
}

// control answers one request on the loop.
func (d *Daemon) control(req control.Request) control.Response {
	switch req.Cmd {
	case control.CmdStatus:
		return control.Response{OK: true, Status: d.snapshot()}
	case control.CmdSources:
		return control.Response{OK: true, Sources: d.sources(time.Now())}
	case control.CmdTrace:
		d.setTrace(req.On)
		return control.Response{OK: true, Status: d.snapshot()}
	case control.CmdElection:
		d.forceElection()
		return control.Response{OK: true}
	case control.CmdStep:
		return d.operatorStep(req)
	case control.CmdQuit:
		d.log.Info("quit requested over the control socket")
		if d.quit != nil {
			d.quit()
		}
		return control.Response{OK: true}
	}
	return control.Response{Error: fmt.Sprintf("unknown command %q (status, sources, trace, election, step, quit)", req.Cmd)}
}

// Reload applies what can change without a restart (log level, trusted
// hosts, tracing) and says what could not. It is safe to call from any
// goroutine while Run runs.
func (d *Daemon) Reload(ctx context.Context, cfg *config.Config) error {
	c := reloadCall{cfg: cfg, reply: make(chan error, 1)}
	select {
	case d.reloadCh <- c:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-c.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
