package timed

import (
	"strings"
	"testing"
)

// TestStateDirLocked: a second daemon cannot take a state directory in
// use; once the first lets go, it can.
func TestStateDirLocked(t *testing.T) {
	dir := t.TempDir()
	f, err := lockStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockStateDir(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second lock: %v, want in use", err)
	}
	f.Close()
	g, err := lockStateDir(dir)
	if err != nil {
		t.Fatalf("after the first let go: %v", err)
	}
	g.Close()
}
