package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/timed-project/timed/config"
)

func runTimed(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// TestConfigNamesTheFile: `timed config` says which file it read, or that
// none was at the default path, then each key with its value and source.
func TestConfigNamesTheFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "timed.yaml")
	if err := os.WriteFile(file, []byte("port: 1525\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runTimed(t, "config", "--config", file, "--election-timeout-min", "4s", "--election-timeout-max", "8s")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# file: " + file + "\n", "port:", "1525", "# file\n", "# flag\n", "# derived from election-timeout-min\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("timed config lacks %q:\n%s", want, out)
		}
	}

	out, err = runTimed(t, "config", "--json", "--config", file)
	if err != nil {
		t.Fatal(err)
	}
	var got configJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || got.SchemaVersion != 1 || got.File != file || !got.FileFound || len(got.Settings) < 30 {
		t.Fatalf("timed config --json: %v %+v", err, got)
	}

	// The no-file case needs the default path absent, as on a machine
	// where timed is not installed (the tests' and CI's).
	if _, err := os.Stat(config.DefaultPath); err == nil {
		t.Fatalf("%s exists on this machine: remove it, or run this test where timed is not installed", config.DefaultPath)
	}
	out, err = runTimed(t, "config")
	if err != nil {
		t.Fatal(err)
	}
	if want := "# file: none found at " + config.DefaultPath; !strings.HasPrefix(out, want) {
		t.Errorf("timed config without a file: %q, want it to start with %q", out, want)
	}
}

// TestEveryProblemOnItsLine: several problems make one line each, after
// a count, so none hides behind the first.
func TestEveryProblemOnItsLine(t *testing.T) {
	file := filepath.Join(t.TempDir(), "timed.yaml")
	if err := os.WriteFile(file, []byte("sync-intervall: 10s\nport: many\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := runTimed(t, "config", "--config", file, "--log-format", "xml")
	if err == nil {
		t.Fatal("a bad configuration loaded")
	}
	var b bytes.Buffer
	printError(&b, err)
	want := "timed: 3 problems:\n" +
		"timed: unknown key \"sync-intervall\" in " + file + ":1 (did you mean \"sync-interval\"?)\n" +
		"timed: invalid port \"many\": accepted: an integer from 1 to 65535\n" +
		"timed: invalid log-format \"xml\": accepted: text or json\n"
	if b.String() != want {
		t.Errorf("printed\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	printError(&b, errors.New("one"))
	if b.String() != "timed: one\n" {
		t.Errorf("one problem: %q", b.String())
	}
}
