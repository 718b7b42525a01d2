package auth

import (
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Defaults of Config.
const (
	// DefaultWindow bounds, at first contact with a sender, how far its
	// timestamp may be from our clock (either way).
	DefaultWindow = time.Hour
	// DefaultSaveInterval is how often the caller saves the state.
	DefaultSaveInterval = 30 * time.Second
	// DefaultMaxSenders caps the replay table.
	DefaultMaxSenders = 4096
)

// NoWindow as Config.Window turns the first-contact timestamp check off.
const NoWindow time.Duration = -1

// Config is what the signer and the verifier are made from: the auth
// settings of the daemon.
type Config struct {
	Mode Mode
	// Keys is the key file's content; needed unless Mode is Off.
	Keys *Keyring
	// SignKey is the ID of the key to sign with; 0 means the lowest ID in
	// Keys. Rotation: add the new key everywhere, then switch SignKey to
	// it everywhere, then remove the old key.
	SignKey uint32
	// UnsignedPeers are the hosts (BSD daemons) whose unsigned datagrams
	// Optional accepts. Ignored by Off and Required.
	UnsignedPeers []netip.Prefix
	// Window is the first-contact timestamp window: 0 means
	// DefaultWindow, a negative value (NoWindow) no check.
	Window time.Duration
	// StateDir holds the sender state and the replay state; empty means
	// nothing is kept across restarts (see the package doc for what that
	// leaves unprotected). The directory must exist.
	StateDir string
	// SaveInterval is how often the caller calls Save: 0 means
	// DefaultSaveInterval. The ceilings saved run four intervals ahead of
	// the counters seen, the sender's reservation two.
	SaveInterval time.Duration
	// MaxSenders caps the replay table: 0 means DefaultMaxSenders.
	MaxSenders int
	// Clock is the wall clock of the trailers' timestamps and of the
	// first-contact window: the daemon's disciplined clock, so that the
	// window compares the clocks the daemons keep. nil: the times given
	// to Sign and Check. The counter never follows it (see the package
	// doc): it advances with the monotonic reading of Sign's time.
	Clock func() time.Time
}

// ErrConfig is wrapped by the errors of NewSigner and NewVerifier about
// the configuration.
var ErrConfig = errors.New("auth config")

func (c *Config) check() error {
	if c.Mode > Required {
		return fmt.Errorf("%w: %v", ErrConfig, c.Mode)
	}
	if c.Mode == Off {
		return nil
	}
	if c.Keys == nil {
		return fmt.Errorf("%w: mode %v needs a key file", ErrConfig, c.Mode)
	}
	if c.SignKey != 0 {
		if _, ok := c.Keys.Lookup(c.SignKey); !ok {
			return fmt.Errorf("%w: signing key %d is not in the key file (IDs there: %v)", ErrConfig, c.SignKey, c.Keys.IDs())
		}
	}
	if c.SaveInterval < 0 {
		return fmt.Errorf("%w: save interval %v is negative", ErrConfig, c.SaveInterval)
	}
	if c.MaxSenders < 0 {
		return fmt.Errorf("%w: max senders %d is negative", ErrConfig, c.MaxSenders)
	}
	return nil
}

func (c *Config) signKey() *Key {
	id := c.SignKey
	if id == 0 {
		id = c.Keys.ids[0]
	}
	k, _ := c.Keys.Lookup(id)
	return k
}

func (c *Config) saveInterval() time.Duration {
	if c.SaveInterval == 0 {
		return DefaultSaveInterval
	}
	return c.SaveInterval
}

func (c *Config) window() time.Duration {
	if c.Window == 0 {
		return DefaultWindow
	}
	return c.Window
}

func (c *Config) maxSenders() int {
	if c.MaxSenders == 0 {
		return DefaultMaxSenders
	}
	return c.MaxSenders
}

// satAdd is a+b, or the largest uint64 where that overflows.
func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}

// signal wakes whoever waits on c, without blocking; c has room for one.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
