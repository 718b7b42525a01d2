package timed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/tsp/auth"
)

// authParts builds the signer and verifier the transport uses from the
// auth settings; both nil when auth is off (BSD's behaviour). A key file
// that others can read, or a state directory that cannot be written or is
// another daemon's, stops start-up here. The daemon holds the state
// directory's lock (d.stateLock) until it stops.
func (d *Daemon) authParts(c config.Auth) (*auth.Signer, *auth.Verifier, error) {
	if c.Mode == auth.Off {
		return nil, nil, nil
	}
	keys, err := auth.LoadKeys(c.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("auth-keys: %w", err)
	}
	if c.StateDir != "" {
		if d.stateLock, err = lockStateDir(c.StateDir); err != nil {
			return nil, nil, err
		}
	}
	acfg := auth.Config{Mode: c.Mode, Keys: keys, SignKey: c.SignKey, UnsignedPeers: c.UnsignedPeers,
		Window: c.Window, StateDir: c.StateDir, Clock: d.clock.Now}
	s, err := auth.NewSigner(acfg, time.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("auth: %w", err)
	}
	v, err := auth.NewVerifier(acfg, s)
	if err != nil {
		return nil, nil, fmt.Errorf("auth: %w", errors.Join(err, s.Close()))
	}
	return s, v, nil
}

// lockStateDir takes an exclusive lock on the state directory for the
// life of the process: two daemons sharing one would share a sender
// identity, and each would drop the other's packets as replays.
func lockStateDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, "timed.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state-dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("state-dir %s is in use by another timed (each daemon needs its own): %w", dir, err)
	}
	return f, nil
}
