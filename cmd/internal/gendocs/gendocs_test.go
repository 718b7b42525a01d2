package gendocs

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/timed-project/timed/config"
)

var date = time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)

// Every flag of config.AddFlags is a key on timed.yaml(5), but --config.
func TestConfigPageHasEveryFlag(t *testing.T) {
	page, err := ConfigPage("v1", date)
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	config.AddFlags(fs)
	n := 0
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" {
			return
		}
		n++
		if !bytes.Contains(page, []byte(`\fB`+f.Name+`\fP: \fI`)) {
			t.Errorf("timed.yaml(5) has no entry for %s", f.Name)
		}
	})
	if keys, _ := Keys(); len(keys) != n {
		t.Errorf("Keys() has %d keys, AddFlags %d", len(keys), n)
	}
	for _, want := range []string{`.TH "TIMED.YAML" "5" "Jan 2026" "timed v1"`, ".SH KEYS", ".SH FILES", "TIMED_SYNC_INTERVAL", "4m0s (profile bsd)"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("timed.yaml(5) lacks %q", want)
		}
	}
	manWarnings(t, "timed.yaml.5", page)
}

// The example configuration the package installs names only real keys,
// commented out or not.
func TestExampleConfigKeys(t *testing.T) {
	f, err := os.Open("../../../systemd/timed.yaml.example")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys, err := Keys()
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, k := range keys {
		known[k.Name] = true
	}
	keyLine := regexp.MustCompile(`^(?:# ?)?([a-z][a-z-]*):(?:\s|$)`)
	sc := bufio.NewScanner(f)
	seen := 0
	for sc.Scan() {
		m := keyLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		seen++
		if !known[m[1]] {
			t.Errorf("timed.yaml.example: %q is no key of config.AddFlags", sc.Text())
		}
	}
	if seen < 10 {
		t.Errorf("found only %d keys in the example: is the pattern right?", seen)
	}
}

// fakeTree stands for a binary's command tree, which lives in its package
// main: a root named as the binary, a subcommand, and this hidden command.
func fakeTree(name string) *cobra.Command {
	root := &cobra.Command{Use: name, Short: "the " + name, Version: "v1", RunE: func(*cobra.Command, []string) error { return nil }}
	config.AddFlags(root.Flags())
	root.AddCommand(&cobra.Command{Use: "sub [host...]", Short: "a subcommand", RunE: func(*cobra.Command, []string) error { return nil }})
	root.AddCommand(Command())
	return root
}

func TestGenerate(t *testing.T) {
	for _, name := range []string{"timed", "timedc"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			root := fakeTree(name)
			root.SetArgs([]string{"gen-docs", dir})
			t.Setenv("SOURCE_DATE_EPOCH", "1767312000") // 2026-01-02
			t.Setenv("TIMED_PORT", "99")                // cleared: the pages show defaults
			if err := root.Execute(); err != nil {
				t.Fatal(err)
			}
			want := []string{
				"man/man8/" + name + ".8", "man/man8/" + name + "-sub.8",
				"bash/" + name, "zsh/_" + name, "fish/" + name + ".fish",
			}
			if name == "timed" {
				want = append(want, "man/man5/timed.yaml.5")
			}
			var got []string
			_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					rel, _ := filepath.Rel(dir, p)
					got = append(got, rel)
				}
				return nil
			})
			if strings.Join(got, " ") != strings.Join(sorted(want), " ") {
				t.Errorf("files:\n got %v\nwant %v", got, sorted(want))
			}
			page, err := os.ReadFile(filepath.Join(dir, "man/man8", name+".8"))
			if err != nil {
				t.Fatal(err)
			}
			// cobra's sections, the hand-written ones in order, and the
			// generated COMMANDS list; the hidden command is nowhere.
			order := []string{".SH NAME", ".SH SYNOPSIS", ".SH DESCRIPTION", ".SH COMMANDS", ".SH OPTIONS", ".SH FILES", ".SH SECURITY", ".SH BSD COMPATIBILITY", ".SH EXIT STATUS", ".SH SEE ALSO"}
			at := -1
			for _, s := range order {
				i := bytes.Index(page, []byte("\n"+s+"\n"))
				if i <= at {
					t.Errorf("%s.8: %q missing or out of order", name, s)
					continue
				}
				at = i
			}
			for _, s := range []string{`.TH "` + strings.ToUpper(name) + `" "8" "Jan 2026" "timed v1"`, `\fB` + name + `-sub(8)\fP`, `\fBtimed.yaml\fP(5)`} {
				if !bytes.Contains(page, []byte(s)) {
					t.Errorf("%s.8 lacks %q", name, s)
				}
			}
			for _, s := range []string{"gen-docs", "completion", "GENDOCS", "Auto generated"} {
				if bytes.Contains(page, []byte(s)) {
					t.Errorf("%s.8 has %q", name, s)
				}
			}
			manWarnings(t, name+".8", page)
			if name == "timed" {
				yaml, _ := os.ReadFile(filepath.Join(dir, "man/man5/timed.yaml.5"))
				if !bytes.Contains(yaml, []byte(`Default: \fB525\fP`)) {
					t.Errorf("timed.yaml(5) shows the environment's port, not the default")
				}
			}
			bash, _ := os.ReadFile(filepath.Join(dir, "bash", name))
			if !bytes.Contains(bash, []byte("__start_"+name)) {
				t.Errorf("bash completion for %s does not look like one", name)
			}
		})
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// manWarnings formats page with man(1), where it is installed, and fails on
// any warning (lintian's check of man pages runs the same).
func manWarnings(t *testing.T, name string, page []byte) {
	t.Helper()
	if _, err := exec.LookPath("man"); err != nil {
		t.Logf("man not installed: %s not checked for warnings", name)
		return
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", path)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8", "MAN_KEEP_FORMATTING=1")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = nil, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("man %s: %v: %s", name, err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("man warns about %s:\n%s", name, stderr.String())
	}
}
