// Command testsummary reads `go test -json` on stdin, prints what go test
// would print (each package's ok/FAIL line, and the output of failed
// tests), and ends with a summary: how many tests passed, failed and were
// skipped, and why each skip happened. `make test` runs every go test
// through it, so that a reader sees at the end what ran and what did not.
//
//	go test -json ./... | go run ./internal/tools/testsummary -label unit
//
// It exits non-zero when a test or a package failed, or when the input
// had no test at all.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// event is one line of test2json's output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

type summary struct {
	passed, failed, skipped int
	skips                   []string // "pkg Test: reason"
	failedPkgs              []string
	// failures is each failed test's assertion lines, repeated in the
	// report: a failed test's output can run to megabytes (daemon logs
	// dumped on failure), and a reader of the end of it must still see
	// why it failed.
	failures []string
}

// assertion is a line t.Errorf or t.Fatalf wrote: "    file_test.go:12: ...".
var assertion = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: `)

const (
	maxReasons   = 5   // assertion lines kept per failed test
	maxReasonLen = 300 // bytes kept of each
)

// reasons are the first assertion lines of a failed test's output,
// leaving out the dumps of daemon logs its cleanup writes and the
// figures the e2e suites log as they measure them (tests/internal/figures).
func reasons(out string) []string {
	var rs []string
	for _, l := range strings.Split(out, "\n") {
		if !assertion.MatchString(l) || strings.Contains(l, "---- log of") || strings.Contains(l, ": figure: ") {
			continue
		}
		l = strings.TrimSpace(l)
		if len(l) > maxReasonLen {
			l = l[:maxReasonLen] + "…"
		}
		if rs = append(rs, l); len(rs) == maxReasons {
			break
		}
	}
	return rs
}

func main() {
	label := flag.String("label", "tests", "what the summary line calls this run")
	out := flag.String("summary", "", "also append the summary to this file")
	flag.Parse()
	s, err := run(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(2)
	}
	text := s.report(*label)
	fmt.Print(text)
	if *out != "" {
		if f, err := os.OpenFile(*out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			fmt.Fprint(f, text)
			f.Close()
		}
	}
	if s.failed > 0 || len(s.failedPkgs) > 0 || s.passed+s.failed+s.skipped == 0 {
		os.Exit(1)
	}
}

// run reads the events, echoing go test's own lines: package results,
// and the whole output of each failed test (buffered until it ends).
func run(r io.Reader, w io.Writer) (*summary, error) {
	s := &summary{}
	buf := map[string]*strings.Builder{} // output per running test
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(w, sc.Text()) // not JSON: a build error, say; show it
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "output":
			if e.Test == "" {
				// Package-level lines: ok/FAIL/build failures, as go test prints them.
				if strings.HasPrefix(e.Output, "ok ") || strings.HasPrefix(e.Output, "FAIL") ||
					strings.HasPrefix(e.Output, "?") || strings.Contains(e.Output, "[build failed]") ||
					strings.HasPrefix(e.Output, "#") || strings.HasPrefix(e.Output, "panic:") {
					fmt.Fprint(w, e.Output)
				}
				continue
			}
			b := buf[key]
			if b == nil {
				b = &strings.Builder{}
				buf[key] = b
			}
			if b.Len() < 1<<20 {
				b.WriteString(e.Output)
			}
		case "pass":
			if e.Test != "" {
				s.passed++
			}
			delete(buf, key)
		case "skip":
			if e.Test != "" {
				s.skipped++
				s.skips = append(s.skips, fmt.Sprintf("%s %s: %s", e.Package, e.Test, skipReason(buf[key])))
			}
			delete(buf, key)
		case "fail":
			if e.Test == "" {
				s.failedPkgs = append(s.failedPkgs, e.Package)
				continue
			}
			s.failed++
			if b := buf[key]; b != nil {
				fmt.Fprint(w, b.String())
				for _, r := range reasons(b.String()) {
					s.failures = append(s.failures, fmt.Sprintf("%s %s: %s", e.Package, e.Test, r))
				}
			}
			delete(buf, key)
		}
	}
	return s, sc.Err()
}

// skipReason is the message t.Skip gave, from the test's output.
func skipReason(b *strings.Builder) string {
	if b == nil {
		return "no reason given"
	}
	var reason string
	for _, l := range strings.Split(b.String(), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- SKIP") {
			continue
		}
		reason = l
	}
	if reason == "" {
		return "no reason given"
	}
	return reason
}

func (s *summary) report(label string) string {
	var b strings.Builder
	// The counts stand alone on their line, in the plain form CI reads.
	fmt.Fprintf(&b, "\n== %s ==\ntests: %d passed, %d failed, %d skipped\n", label, s.passed, s.failed, s.skipped)
	sort.Strings(s.skips)
	for _, k := range s.skips {
		fmt.Fprintf(&b, "   skipped: %s\n", k)
	}
	for _, f := range s.failures {
		fmt.Fprintf(&b, "   failed: %s\n", f)
	}
	for _, p := range s.failedPkgs {
		fmt.Fprintf(&b, "   FAILED package: %s\n", p)
	}
	return b.String()
}
