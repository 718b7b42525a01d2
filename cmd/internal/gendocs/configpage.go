package gendocs

import (
	"bytes"
	"fmt"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/pflag"

	"github.com/timed-project/timed/config"
)

// Key is one key of timed.yaml, as config.AddFlags registers it.
type Key struct {
	Name      string // file key and long option
	Shorthand string // BSD's letter, if any
	Type      string // as the page states it
	Default   string // "" when there is none
	Usage     string
	Env       string // the environment variable
}

// notInFile are flags that are no key of the file.
var notInFile = map[string]string{
	"config": "the file's own path: a flag (--config) or TIMED_CONFIG only",
}

// Keys lists every key of timed.yaml in the order AddFlags registers them.
// It reads the flag set, so a new option is on the page as soon as it is a
// flag.
//
// A timer's flag has no default of its own (it comes from the profile):
// its default is the effective value of a configuration loaded from
// nothing, BSD's. The environment is read too (config.Load reads it), so
// gen-docs clears TIMED_* first.
func Keys() ([]Key, error) {
	fs := pflag.NewFlagSet("timed", pflag.ContinueOnError)
	config.AddFlags(fs)
	fs.SortFlags = false
	if err := fs.Parse([]string{"--config="}); err != nil {
		return nil, err
	}
	cfg, err := config.Load(fs)
	if err != nil {
		return nil, fmt.Errorf("the default configuration: %w", err)
	}
	effective := map[string]string{}
	for _, s := range config.Effective(fs, cfg) {
		effective[s.Key] = s.Value
	}
	var keys []Key
	fs.VisitAll(func(f *pflag.Flag) {
		if _, ok := notInFile[f.Name]; ok {
			return
		}
		keys = append(keys, Key{
			Name:      f.Name,
			Shorthand: f.Shorthand,
			Type:      typeName(f),
			Default:   defaultValue(f, effective),
			Usage:     strings.TrimSuffix(f.Usage, " (Go duration; default from --profile or the clock settings)"),
			Env:       config.EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_")),
		})
	})
	return keys, nil
}

func typeName(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "bool":
		return "boolean"
	case "int", "uint32":
		return "integer"
	case "stringSlice":
		return "list"
	}
	if strings.Contains(f.Usage, "Go duration") {
		return "duration"
	}
	return "string"
}

func defaultValue(f *pflag.Flag, effective map[string]string) string {
	switch {
	case f.DefValue == "" && strings.Contains(f.Usage, "--profile"):
		return effective[f.Name] + " (profile bsd)"
	case f.DefValue == "", f.DefValue == "[]":
		return ""
	}
	return f.DefValue
}

// ConfigPage is timed.yaml(5): the hand-written sections of
// pages/timed.yaml.5.md with a KEYS section generated from Keys.
func ConfigPage(version string, date time.Time) ([]byte, error) {
	secs, err := readPage("timed.yaml.5")
	if err != nil {
		return nil, err
	}
	var md bytes.Buffer
	fmt.Fprintf(&md, "%% \"TIMED.YAML\" \"5\" %q \"timed %s\" %q\n", date.Format("Jan 2006"), version, FileMan)
	for _, s := range secs {
		fmt.Fprintf(&md, "# %s\n%s\n", s.title, s.body)
		if s.title == "DESCRIPTION" {
			md.WriteString("# KEYS\n")
			md.WriteString("Every key, with its type, default, environment variable and command-line option. " +
				"Timer keys left unset take the value of **profile**.\n\n")
			keys, err := Keys()
			if err != nil {
				return nil, err
			}
			for _, k := range keys {
				md.WriteString(keyEntry(k))
			}
		}
	}
	if !strings.Contains(md.String(), "# KEYS\n") {
		return nil, fmt.Errorf("pages/timed.yaml.5.md: no DESCRIPTION to put KEYS after")
	}
	return md2man.Render(md.Bytes()), nil
}

func keyEntry(k Key) string {
	var b strings.Builder
	fmt.Fprintf(&b, "**%s**: *%s*\n: %s.", k.Name, escapeMD(k.Type), escapeMD(sentence(k.Usage)))
	if k.Default != "" {
		fmt.Fprintf(&b, " Default: **%s**.", escapeMD(k.Default))
	}
	flag := "--" + k.Name
	if k.Shorthand != "" {
		flag = "-" + k.Shorthand + ", " + flag
	}
	fmt.Fprintf(&b, " Environment: **%s**; option: **%s**.\n\n", escapeMD(k.Env), flag)
	return b.String()
}

// sentence is usage text without a final full stop (the page adds one).
func sentence(s string) string {
	return strings.TrimSuffix(strings.TrimSpace(s), ".")
}
