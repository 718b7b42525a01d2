// Command timedc is the admin tool of timed. Its BSD commands (msite,
// trace, election, clockdiff) speak TSP over UDP exactly as BSD's timedc
// does, so they work against BSD daemons too; `status`, `sources`, `step`
// and `waitsync` speak to the local daemon's control socket. Without arguments
// it prompts, like BSD's.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/timed-project/timed/cmd/internal/gendocs"
	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/tsp/auth"
)

// options shared by every command.
type options struct {
	json          bool
	port          int
	timeout       time.Duration
	controlSocket string
	out           io.Writer
	prompting     bool      // inside the interactive loop
	screen        io.Writer // the raw terminal for --watch's clear sequence; nil when stdout is not one
	compact       bool      // JSON on one line (--watch's JSON Lines)

	authKeys    string       // key file to sign with (auth.go)
	authSignKey uint32       // key ID to sign with; 0: the lowest
	signer      *auth.Signer // nil: send unsigned
	authChecked bool         // setupAuth ran
}

// version is set at build time (make build: -X main.version=…).
var version = "dev"

func main() {
	opts := &options{out: safeWriter{os.Stdout}, port: 525, controlSocket: config.DefaultControlSocket}
	if isTerminal(os.Stdout) {
		opts.screen = os.Stdout
	}
	root := newRoot(opts)
	root.AddCommand(gendocs.Command()) // hidden: make man's `timedc gen-docs DIR`
	root.SetArgs(negativesAsArguments(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(safeWriter{os.Stderr}, "timedc:", err)
		os.Exit(exitCode(err))
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
	root.PersistentFlags().DurationVar(&opts.timeout, "timeout", opts.timeout, "how long to wait for answers (default: BSD's, per command; waitsync: for synchronisation, 0 for ever)")
	root.PersistentFlags().StringVar(&opts.controlSocket, "control-socket", opts.controlSocket, "the local daemon's control socket (status, sources, step, waitsync)")
	root.PersistentFlags().StringVar(&opts.authKeys, "auth-keys", opts.authKeys, "key file to sign with, for daemons with --auth (default: TIMED_AUTH_KEYS, or the daemon's configuration)")
	root.PersistentFlags().Uint32Var(&opts.authSignKey, "auth-sign-key", opts.authSignKey, "ID of the key to sign with (default: the lowest)")
	root.SetOut(opts.out)
	root.AddCommand(msiteCmd(opts), traceCmd(opts), electionCmd(opts), statusCmd(opts), sourcesCmd(opts), stepCmd(opts), waitsyncCmd(opts), clockdiffCmd(opts), ringCmd(opts),
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

// schemaVersion is the version of timedc's JSON (README, "timedc's JSON"):
// every object of every command carries it, so a script can refuse a
// shape it does not know. It changes only when a field changes meaning or
// goes away; new fields do not change it.
const schemaVersion = 1

// emit prints v as JSON with --json, else the text lines.
func (o *options) emit(v any, text string) error {
	if o.json {
		enc := json.NewEncoder(o.out)
		if !o.compact {
			enc.SetIndent("", "  ")
		}
		return enc.Encode(v)
	}
	_, err := fmt.Fprintln(o.out, text)
	return err
}

// forEachHost runs one query per host; every command that speaks to a
// daemon answers through it, the single-host ones (trace, status, step,
// ring elect) with a list of one, so that --json has one shape: an array
// of objects, each with "host" and "schema_version", and "error" where the
// host failed (with the fields the command still knows, or none). Text
// output has a line per host that answered. Failures make one error line
// and a non-zero exit, so scripts see them.
func (o *options) forEachHost(hosts []string, query func(host string) (line string, fields map[string]any, err error)) error {
	results := []map[string]any{}
	var lines, failures []string
	for _, h := range hosts {
		line, fields, err := query(h)
		if fields == nil {
			fields = map[string]any{}
		}
		fields["host"] = h
		fields["schema_version"] = schemaVersion
		if err != nil {
			fields["error"] = err.Error()
			failures = append(failures, err.Error())
		} else {
			lines = append(lines, line)
		}
		results = append(results, fields)
	}
	if o.json || len(lines) > 0 {
		if err := o.emit(results, strings.Join(lines, "\n")); err != nil {
			return err
		}
	}
	if len(failures) > 0 {
		return errors.New(strings.Join(failures, "; "))
	}
	return nil
}

// fieldsOf is v's JSON object as fields for forEachHost; numbers keep
// their exact text.
func fieldsOf(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return nil, err
	}
	return fields, nil
}

func (o *options) wait(bsdDefault time.Duration) time.Duration {
	if o.timeout > 0 {
		return o.timeout
	}
	return bsdDefault
}
