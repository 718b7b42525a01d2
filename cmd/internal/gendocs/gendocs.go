// Package gendocs writes the documentation that is generated from the
// commands themselves, so that it cannot drift from them: the man pages of
// a cobra command tree (section 8, cobra/doc's GenManTree) with the
// hand-written sections of this package spliced into the root's page,
// timed.yaml(5) with every key that config.AddFlags registers, and the
// bash, zsh and fish completion scripts.
//
// Each binary carries it as a hidden command, `timed gen-docs DIR` and
// `timedc gen-docs DIR` (make man runs them): only the binary has its
// command tree, with the flags and defaults main gives it. Nothing here
// runs in the daemon's or timedc's ordinary paths.
package gendocs

import (
	"bytes"
	"embed"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cpuguy83/go-md2man/v2/md2man"
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"github.com/timed-project/timed/config"
)

// The hand-written sections, one file per page: NAME.SECTION.md.
//
//go:embed pages/*.md
var pages embed.FS

// Layout of the output directory, relative to DIR. The Makefile and the
// package description (packaging/nfpm.yaml) install from these paths.
const (
	ManDir   = "man"  // man/man8/timed.8, man/man5/timed.yaml.5, …
	BashDir  = "bash" // bash/timedc: /usr/share/bash-completion/completions/timedc
	ZshDir   = "zsh"  // zsh/_timedc: a zsh function directory
	FishDir  = "fish" // fish/timedc.fish: fish's vendor_completions.d
	Manual   = "System Manager's Manual"
	FileMan  = "File Formats Manual"
	hidePath = "completion" // cobra's own completion command: scripts, not pages
)

// Command is the hidden `gen-docs DIR` command of a binary's root.
func Command() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-docs DIR",
		Short:  "write the man pages and shell completions under DIR (used by make man)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		// The root's hooks (timedc reads its key file there) have no
		// business here.
		PersistentPreRunE: func(*cobra.Command, []string) error { return nil },
		RunE: func(cmd *cobra.Command, args []string) error {
			// The pages show the defaults, not this shell's TIMED_*.
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, config.EnvPrefix+"_") {
					os.Unsetenv(k)
				}
			}
			date, err := sourceDate()
			if err != nil {
				return err
			}
			return Generate(cmd.Root(), args[0], date)
		},
	}
}

// sourceDate is the pages' date: SOURCE_DATE_EPOCH when set (make man sets
// the last commit's), so that the same commit gives the same pages.
func sourceDate() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Now().UTC(), nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: %w", s, err)
	}
	return time.Unix(n, 0).UTC(), nil
}

// Generate writes root's man pages, completions and, for timed, timed.yaml(5)
// under dir.
func Generate(root *cobra.Command, dir string, date time.Time) error {
	name := root.Name()
	for _, d := range []string{filepath.Join(ManDir, "man8"), BashDir, ZshDir, FishDir} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := manTree(root, filepath.Join(dir, ManDir, "man8"), date); err != nil {
		return err
	}
	if name == "timed" {
		if err := os.MkdirAll(filepath.Join(dir, ManDir, "man5"), 0o755); err != nil {
			return err
		}
		page, err := ConfigPage(root.Version, date)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, ManDir, "man5", "timed.yaml.5"), page, 0o644); err != nil {
			return err
		}
	}
	return completions(root, dir)
}

func header(root *cobra.Command, section, manual string, date time.Time) *doc.GenManHeader {
	return &doc.GenManHeader{Section: section, Date: &date, Source: "timed " + root.Version, Manual: manual}
}

// manTree writes a page for every visible command (cobra/doc's
// GenManTree), then the root's page again with the hand-written sections.
func manTree(root *cobra.Command, dir string, date time.Time) error {
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == hidePath {
			c.Hidden = true
		}
	}
	visit(root, func(c *cobra.Command) { c.DisableAutoGenTag = true })
	if err := doc.GenManTree(root, header(root, "8", Manual, date), dir); err != nil {
		return err
	}
	page, err := rootPage(root, date)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, root.Name()+".8"), page, 0o644)
}

func visit(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		visit(sub, f)
	}
}

// section is one "# TITLE" section of a hand-written page.
type section struct{ title, body string }

// readPage splits pages/NAME.md into its sections.
func readPage(name string) ([]section, error) {
	b, err := pages.ReadFile("pages/" + name + ".md")
	if err != nil {
		return nil, err
	}
	text := string(b)
	// A leading <!-- comment --> says what the file is; it is not output.
	if rest, ok := strings.CutPrefix(text, "<!--"); ok {
		_, after, found := strings.Cut(rest, "-->")
		if !found {
			return nil, fmt.Errorf("pages/%s.md: unterminated comment", name)
		}
		text = after
	}
	var out []section
	fenced := false // inside ``` code, where "# " is YAML's comment
	for _, line := range strings.SplitAfter(text, "\n") {
		if strings.HasPrefix(line, "```") {
			fenced = !fenced
		}
		if t, ok := strings.CutPrefix(line, "# "); ok && !fenced {
			out = append(out, section{title: strings.TrimSpace(t)})
			continue
		}
		if len(out) == 0 {
			if strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("pages/%s.md: text before the first section", name)
			}
			continue
		}
		out[len(out)-1].body += line
	}
	return out, nil
}

// rootPage is cobra's page of root with the hand-written DESCRIPTION, a
// COMMANDS section listing the visible subcommands, and the other
// hand-written sections before SEE ALSO, whose references are added to
// cobra's.
func rootPage(root *cobra.Command, date time.Time) ([]byte, error) {
	secs, err := readPage(root.Name() + ".8")
	if err != nil {
		return nil, err
	}
	var long, seeAlso string
	var extra bytes.Buffer
	for _, s := range secs {
		switch s.title {
		case "DESCRIPTION":
			long = strings.TrimSpace(s.body)
		case "SEE ALSO":
			seeAlso = strings.TrimSpace(s.body)
		default:
			fmt.Fprintf(&extra, "# %s\n%s\n", s.title, s.body)
		}
	}
	if long == "" {
		return nil, fmt.Errorf("pages/%s.8.md: no DESCRIPTION", root.Name())
	}
	if cmds := commandList(root); cmds != "" {
		long += "\n\n# COMMANDS\n" + cmds
	}
	saved := root.Long
	root.Long = long
	defer func() { root.Long = saved }()
	var page bytes.Buffer
	if err := doc.GenMan(root, header(root, "8", Manual, date), &page); err != nil {
		return nil, err
	}
	return splice(page.Bytes(), roffBody(extra.Bytes()), seeAlso), nil
}

// commandList is a definition list of root's visible subcommands.
func commandList(root *cobra.Command) string {
	var b strings.Builder
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() || c.IsAdditionalHelpTopicCommand() {
			continue
		}
		page := strings.ReplaceAll(c.CommandPath(), " ", "-")
		fmt.Fprintf(&b, "**%s**\n: %s; see **%s**(8).\n\n", escapeMD(c.Use), escapeMD(c.Short), page)
	}
	return b.String()
}

// escapeMD keeps markdown from reading a command's usage as markup.
func escapeMD(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `_`, `\_`, "`", "\\`", `[`, `\[`, `]`, `\]`, `<`, `\<`)
	return r.Replace(s)
}

// roffBody renders markdown sections to roff without md2man's prologue
// (the tbl marker, .nh, and the .TH it makes of the first heading), for
// splicing into a rendered page.
func roffBody(md []byte) []byte {
	if len(bytes.TrimSpace(md)) == 0 {
		return nil
	}
	const title = "GENDOCS-SPLICE"
	out := md2man.Render(append([]byte("# "+title+"\n"), md...))
	if i := bytes.Index(out, []byte(".TH "+title+"\n")); i >= 0 {
		out = out[i+len(".TH "+title+"\n"):]
	}
	return out
}

// splice puts extra before the page's SEE ALSO (or at its end) and adds the
// references in seeAlso (markdown, "**name**(N), …") to it.
func splice(page, extra []byte, seeAlso string) []byte {
	marker := []byte("\n.SH SEE ALSO\n")
	i := bytes.Index(page, marker)
	if i < 0 {
		out := append(append([]byte{}, page...), extra...)
		if seeAlso != "" {
			out = append(out, roffBody([]byte("# SEE ALSO\n"+seeAlso+"\n"))...)
		}
		return out
	}
	var out bytes.Buffer
	out.Write(page[:i+1])
	out.Write(extra)
	rest := page[i+1:]
	if seeAlso != "" {
		// cobra's references are one paragraph, ending at the page's end.
		rest = append(bytes.TrimRight(rest, "\n"), []byte(", ")...)
		rest = append(rest, bytes.TrimPrefix(roffInline(seeAlso), []byte(".PP\n"))...)
	}
	out.Write(rest)
	return out.Bytes()
}

// roffInline renders one markdown paragraph to roff.
func roffInline(md string) []byte {
	out := roffBody([]byte(md + "\n"))
	return bytes.TrimLeft(out, "\n")
}

// completions writes root's bash, zsh and fish completion scripts.
func completions(root *cobra.Command, dir string) error {
	name := root.Name()
	gen := []struct {
		path string
		f    func(*bytes.Buffer) error
	}{
		{filepath.Join(BashDir, name), func(b *bytes.Buffer) error { return root.GenBashCompletionV2(b, true) }},
		{filepath.Join(ZshDir, "_"+name), func(b *bytes.Buffer) error { return root.GenZshCompletion(b) }},
		{filepath.Join(FishDir, name+".fish"), func(b *bytes.Buffer) error { return root.GenFishCompletion(b, true) }},
	}
	for _, g := range gen {
		var b bytes.Buffer
		if err := g.f(&b); err != nil {
			return fmt.Errorf("%s: %w", g.path, err)
		}
		if err := os.WriteFile(filepath.Join(dir, g.path), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
