// Package figures is the end-to-end suites' table of measured figures
// (tests/e2e, tests/vm): each scenario records what it measured, reported
// and not asserted, and the suite writes the table at the end, to the file
// $TIMED_E2E_FIGURES names (make e2e and make e2e-vm print that file
// last), or to stdout.
package figures

import (
	"bytes"
	"fmt"
	"os"
	"sync"
	"testing"
	"text/tabwriter"
)

// Table collects figures; its zero value is ready, and safe for tests
// running in parallel.
type Table struct {
	mu   sync.Mutex
	rows []row
}

type row struct{ scenario, name, value string }

// Report records one figure of the test t (its name is the scenario) and
// logs it.
func (tb *Table) Report(t testing.TB, name, format string, args ...any) {
	t.Helper()
	v := fmt.Sprintf(format, args...)
	t.Logf("figure: %s = %s", name, v)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.rows = append(tb.rows, row{t.Name(), name, v})
}

// Write prints the table to $TIMED_E2E_FIGURES, or to stdout when it is
// unset.
func (tb *Table) Write() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tFIGURE\tVALUE")
	for _, r := range tb.rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.scenario, r.name, r.value)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if path := os.Getenv("TIMED_E2E_FIGURES"); path != "" {
		return os.WriteFile(path, b.Bytes(), 0o644)
	}
	_, err := os.Stdout.Write(b.Bytes())
	return err
}
