// Command timed is the TEMPO time daemon: it elects a master among the
// daemons of its network and keeps their clocks together. BSD's options
// keep their meanings (-M, -F, -n, -i, -t, -d); everything else has a long
// option, an environment variable (TIMED_*) and a key in the YAML file.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/timed-project/timed/cmd/internal/gendocs"
	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/timed"
)

// version is set at build time (make build: -X main.version=…).
var version = "dev"

func main() {
	root := newRoot()
	root.AddCommand(gendocs.Command()) // hidden: make man's `timed gen-docs DIR`
	if err := root.Execute(); err != nil {
		printError(os.Stderr, err)
		os.Exit(1)
	}
}

// printError writes each problem on a line of its own: a configuration
// with several bad values gets them all, each after "timed:".
func printError(w io.Writer, err error) {
	lines := strings.Split(err.Error(), "\n")
	if len(lines) > 1 {
		fmt.Fprintf(w, "timed: %d problems:\n", len(lines))
	}
	for _, l := range lines {
		fmt.Fprintln(w, "timed:", l)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "timed [flags] [trusted-host...]",
		Short: "TEMPO time daemon",
		Long: `timed elects one master among the time daemons of a network (TSP, as 4.3BSD's
timed) and the master keeps every clock at the averaged network time.
As with BSD's -F, host names after -F are all trusted: timed -F a b c.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Arguments are trusted hosts after -F (checked in load), not
		// subcommands: without this cobra would call them unknown commands.
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := load(cmd.Flags(), args)
			if err != nil {
				return err
			}
			return run(cmd.Context(), cmd.Flags(), args, cfg)
		},
	}
	config.AddFlags(root.Flags())
	// Hidden, for tests (deploy/README.md): BSD's daemon on the wire. Not
	// a configuration key: no file or environment sets it.
	root.Flags().Bool(bsdCompatFlag, false, "drop and never send version-2 datagrams, as BSD's timed (tests only)")
	_ = root.Flags().MarkHidden(bsdCompatFlag)
	root.AddCommand(configCmd(root))
	return root
}

// bsdCompatFlag is the hidden flag that makes the daemon look like BSD's
// on the wire (timed.Options.BSDCompat).
const bsdCompatFlag = "bsd-compat"

// load reads the configuration. Positional arguments are more trusted
// hosts when -F was given (BSD's -F takes every following argument), and
// an error otherwise.
func load(fs *pflag.FlagSet, args []string) (*config.Config, error) {
	if len(args) > 0 {
		if !fs.Changed("trusted") {
			return nil, fmt.Errorf("unexpected argument %q: only trusted host names may follow -F", args[0])
		}
		for _, a := range args {
			if err := fs.Set("trusted", a); err != nil {
				return nil, err
			}
		}
	}
	return config.Load(fs)
}

func run(ctx context.Context, fs *pflag.FlagSet, args []string, cfg *config.Config) error {
	log, err := timed.NewLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		return err
	}
	bsdCompat, err := fs.GetBool(bsdCompatFlag)
	if err != nil {
		return err
	}
	d, err := timed.New(cfg, log, timed.Options{BSDCompat: bsdCompat})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				next, err := config.Load(fs)
				if err == nil {
					err = d.Reload(ctx, next)
				}
				if err != nil {
					log.WithError(err).Warn("SIGHUP")
				}
			}
		}
	}()
	return d.Run(ctx)
}

func configCmd(root *cobra.Command) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "config",
		Short: "print the effective configuration and where each value comes from",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := root.Flags()
			cfg, err := load(fs, args)
			if err != nil {
				return err
			}
			settings := config.Effective(fs, cfg)
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(configJSON{SchemaVersion: 1, File: cfg.File, FileFound: cfg.FileFound, Settings: settings})
			}
			fmt.Fprintln(cmd.OutOrStdout(), fileLine(cfg))
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 2, 4, 2, ' ', 0)
			for _, s := range settings {
				src := s.Source
				if s.DerivedFrom != "" {
					src += " from " + s.DerivedFrom
				}
				fmt.Fprintf(tw, "%s:\t%s\t# %s\n", s.Key, quote(s.Value), src)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	// The daemon's flags apply to `timed config` too: `timed --port 1525 config`.
	cmd.Flags().AddFlagSet(root.Flags())
	return cmd
}

// configJSON is `timed config --json`: the file read and every setting.
type configJSON struct {
	SchemaVersion int              `json:"schema_version"`
	File          string           `json:"file"`       // the file looked for; "" with --config ""
	FileFound     bool             `json:"file_found"` // false: none there (at the default path, not an error)
	Settings      []config.Setting `json:"settings"`
}

// fileLine says which file was read, as a YAML comment so that the output
// stays a valid configuration file.
func fileLine(c *config.Config) string {
	switch {
	case c.FileFound:
		return "# file: " + c.File
	case c.File == "":
		return "# file: none (--config \"\")"
	}
	return "# file: none found at " + c.File + " (defaults, environment and flags only)"
}

func quote(s string) string {
	if s == "" || strings.ContainsAny(s, ": #") {
		return fmt.Sprintf("%q", s)
	}
	return s
}
