package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/viper"

	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/tsp/auth"
)

// Daemons with --auth optional or required drop unsigned packets (from
// timedc too), so timedc signs what it sends when it has the key file:
// --auth-keys, TIMED_AUTH_KEYS, or the daemon's own configuration
// (/etc/timed/timed.yaml) when that sets auth. It does not verify the
// answers: it only reads them, and a forged answer can only mislead the
// admin reading it, as with BSD's timedc.

// setupAuth makes o.signer from the key file, if there is one to use. It
// runs when a command first sends, so that commands that send nothing
// (status, completion) never read the key file.
func (o *options) setupAuth() error {
	if o.signer != nil || o.authChecked {
		return nil
	}
	o.authChecked = true
	path := o.authKeys
	if path == "" {
		path = os.Getenv(config.EnvPrefix + "_AUTH_KEYS")
	}
	if path == "" {
		path = daemonKeyFile(config.DefaultPath)
	}
	if path == "" {
		return nil
	}
	keys, err := auth.LoadKeys(path)
	if err != nil {
		return fmt.Errorf("auth keys (timedc signs for daemons that require it): %w", err)
	}
	s, err := auth.NewSigner(auth.Config{Mode: auth.Required, Keys: keys, SignKey: o.authSignKey}, time.Now())
	if err != nil {
		return fmt.Errorf("auth: %w", err)
	}
	o.signer = s
	return nil
}

// daemonKeyFile is the key file of the daemon's configuration at path
// when its auth is on; "" when it is off, or the file cannot be read
// (timedc then sends unsigned, which daemons without auth and BSD's take).
func daemonKeyFile(path string) string {
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if v.ReadInConfig() != nil {
		return ""
	}
	if m, err := auth.ParseMode(v.GetString("auth")); err != nil || m == auth.Off {
		return ""
	}
	return v.GetString("auth-keys")
}

// sign appends the auth trailer when timedc has a key.
func (o *options) sign(b []byte) ([]byte, error) {
	if err := o.setupAuth(); err != nil {
		return nil, err
	}
	if o.signer == nil {
		return b, nil
	}
	return o.signer.Sign(b, time.Now())
}
