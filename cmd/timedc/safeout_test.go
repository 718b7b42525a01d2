package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestSafeWriter: control characters and invalid UTF-8 from the network
// reach the terminal escaped; ordinary text, newlines, tabs and the ± and µ
// of timedc's own output pass unchanged, and JSON stays valid.
func TestSafeWriter(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"host1\tmaster ±0.1 ms µs\n", "host1\tmaster ±0.1 ms µs\n"},
		{"evil\x1b[2J\x1b[H", `evil\u001b[2J\u001b[H`},
		{"csi\u009b31m", `csi\u009b31m`},
		{"bad\xff\x07", `bad\u00ff\u0007`},
		{"del\x7f", `del\u007f`},
	} {
		var b bytes.Buffer
		n, err := safeWriter{&b}.Write([]byte(c.in))
		if err != nil || n != len(c.in) || b.String() != c.want {
			t.Errorf("%q: wrote %q (%d, %v), want %q", c.in, b.String(), n, err, c.want)
		}
	}
	var b bytes.Buffer
	if err := json.NewEncoder(safeWriter{&b}).Encode(map[string]string{"host": "x\u009by\x7f"}); err != nil {
		t.Fatal(err)
	}
	var back map[string]string
	if err := json.Unmarshal(b.Bytes(), &back); err != nil || back["host"] != "x\u009by\x7f" {
		t.Fatalf("JSON through the writer: %s → %v, %v", b.String(), back, err)
	}
}
