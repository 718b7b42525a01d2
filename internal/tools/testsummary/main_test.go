package main

import (
	"strings"
	"testing"
)

// TestSummary: passes, fails and skips are counted, a skip's reason is
// its last line of output, a failed test's output is shown, and the
// counts stand alone on their line.
func TestSummary(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p","Test":"TestA"}`,
		`{"Action":"pass","Package":"p","Test":"TestA"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"=== RUN   TestB\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"    x_test.go:9: shared folder absent\n"}`,
		`{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}`,
		`{"Action":"skip","Package":"p","Test":"TestB"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:2: figure: spread = 3 µs\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:3: boom\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:7: ---- log of n1 ----\n"}`,
		`{"Action":"output","Package":"p","Test":"TestC","Output":"time=x level=info msg=\"clock corrected\"\n"}`,
		`{"Action":"fail","Package":"p","Test":"TestC"}`,
		`{"Action":"output","Package":"p","Output":"FAIL\tp\t0.1s\n"}`,
		`{"Action":"fail","Package":"p"}`,
		`not json: a build error`,
	}, "\n")
	var out strings.Builder
	s, err := run(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if s.passed != 1 || s.failed != 1 || s.skipped != 1 || len(s.failedPkgs) != 1 {
		t.Fatalf("counts %+v", s)
	}
	for _, want := range []string{"boom", "FAIL\tp", "not json: a build error"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	rep := s.report("unit")
	for _, want := range []string{"\ntests: 1 passed, 1 failed, 1 skipped\n", "skipped: p TestB: x_test.go:9: shared folder absent",
		"failed: p TestC: c_test.go:3: boom\n", "FAILED package: p"} {
		if !strings.Contains(rep, want) {
			t.Errorf("report lacks %q:\n%s", want, rep)
		}
	}
	if strings.Contains(rep, "log of") || strings.Contains(rep, "figure:") {
		t.Errorf("report repeats a log dump's header or a figure as a reason:\n%s", rep)
	}
}
