// Command timedc is the admin tool of timed. Its BSD commands (msite,
// trace, election, clockdiff) speak TSP over UDP exactly as BSD's timedc
// does, so they work against BSD daemons too; `status` and `step` speak to
// the local daemon's control socket. Without arguments it prompts, like
// BSD's.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/internal/gendocs"
	"github.com/timed-project/timed/tsp/auth"
)

// options shared by every command.
type options struct {
	json          bool
	port          int
	timeout       time.Duration
	controlSocket string
	out           io.Writer
	prompting     bool // inside the interactive loop

	authKeys    string       // key file to sign with (auth.go)
	authSignKey uint32       // key ID to sign with; 0: the lowest
	signer      *auth.Signer // nil: send unsigned
}

// version is set at build time (make build: -X main.version=…).
var version = "dev"

func main() {
	opts := &options{out: safeWriter{os.Stdout}, port: 525, controlSocket: config.DefaultControlSocket}
	root := newRoot(opts)
	root.AddCommand(gendocs.Command()) // hidden: make man's `timedc gen-docs DIR`
	root.SetArgs(negativesAsArguments(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(safeWriter{os.Stderr}, "timedc:", err)
		os.Exit(1)
	}
}

func newRoot(opts *options) *cobra.Command {
	root := &cobra.Command{
		Use:           "timedc",
		Short:         "timed control program",
		Long:          "timedc queries and controls timed daemons, BSD's or ours. Without arguments it reads commands at a prompt.",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		// No command: read commands at a prompt, as BSD's timedc does.
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.prompting {
				return errors.New("no command given")
			}
			return interactive(opts, cmd.InOrStdin())
		},
	}
	// Defaults come from opts, so that lines typed at the prompt keep the
	// flags given on the command line.
	root.PersistentFlags().BoolVar(&opts.json, "json", opts.json, "print results as JSON")
	root.PersistentFlags().IntVar(&opts.port, "port", opts.port, "UDP port of the daemons (a host may also be given as host:port)")
	root.PersistentFlags().DurationVar(&opts.timeout, "timeout", opts.timeout, "how long to wait for answers (default: BSD's, per command)")
	root.PersistentFlags().StringVar(&opts.controlSocket, "control-socket", opts.controlSocket, "the local daemon's control socket (status, step)")
	root.PersistentFlags().StringVar(&opts.authKeys, "auth-keys", opts.authKeys, "key file to sign with, for daemons with --auth (default: TIMED_AUTH_KEYS, or the daemon's configuration)")
	root.PersistentFlags().Uint32Var(&opts.authSignKey, "auth-sign-key", opts.authSignKey, "ID of the key to sign with (default: the lowest)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return opts.setupAuth() }
	root.SetOut(opts.out)
	root.AddCommand(msiteCmd(opts), traceCmd(opts), electionCmd(opts), statusCmd(opts), stepCmd(opts), clockdiffCmd(opts), ringCmd(opts),
		&cobra.Command{Use: "quit", Short: "exit timedc", Aliases: []string{"exit"}, RunE: func(*cobra.Command, []string) error { return errQuit }})
	return root
}

var errQuit = errors.New("quit")

// interactive reads one command a line, as BSD timedc does, until EOF or
// quit. Each line gets a fresh command tree (with the flags given on the
// command line) so flags never leak between lines. Commands may be
// abbreviated to any unique prefix. It fails if any command failed.
func interactive(base *options, in io.Reader) error {
	cobra.EnablePrefixMatching = true
	sc := bufio.NewScanner(in)
	var failed error
	for {
		fmt.Fprint(base.out, "timedc> ")
		if !sc.Scan() {
			fmt.Fprintln(base.out)
			return failed
		}
		args := strings.Fields(sc.Text())
		if len(args) == 0 {
			continue
		}
		if args[0] == "?" {
			args[0] = "help"
		}
		opts := *base
		opts.prompting = true
		root := newRoot(&opts)
		root.SetArgs(negativesAsArguments(args))
		if err := root.Execute(); err != nil {
			if errors.Is(err, errQuit) {
				return failed
			}
			fmt.Fprintln(base.out, "?", err)
			failed = errors.New("a command failed")
		}
	}
}

// emit prints v as JSON with --json, else the text lines.
func (o *options) emit(v any, text string) error {
	if o.json {
		enc := json.NewEncoder(o.out)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	_, err := fmt.Fprintln(o.out, text)
	return err
}

func (o *options) wait(bsdDefault time.Duration) time.Duration {
	if o.timeout > 0 {
		return o.timeout
	}
	return bsdDefault
}
