// Package vectors reads the TSP packets captured from the BSD daemon (and
// the synthetic ones beside them) for tests: ../shared/vectors beside the
// checkout, or $TIMED_VECTORS. The data stays there; nothing is copied
// into the repository. Only tests of this shared data may skip, and only
// where the folder is absent.
package vectors

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// Dir is the vectors folder: $TIMED_VECTORS, else shared/vectors beside
// the checkout (found from this file's place in the module).
func Dir() string {
	if d := os.Getenv("TIMED_VECTORS"); d != "" {
		return d
	}
	_, file, _, _ := runtime.Caller(0) // …/internal/vectors/vectors.go
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "shared", "vectors")
}

// Present reports whether the folder exists (a fuzzer seeds from it only
// then).
func Present() bool {
	_, err := os.Stat(Dir())
	return err == nil
}

// Load decodes every line of every *.jsonl file into a T, calling where
// with each value's file:line for failure messages (where may be nil). It
// skips tb when the folder is absent and fails it when the folder holds no
// vectors or a line does not decode.
func Load[T any](tb testing.TB, where func(v *T, at string)) []T {
	tb.Helper()
	dir := Dir()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		if _, statErr := os.Stat(dir); os.IsNotExist(statErr) {
			tb.Skipf("test vectors not found at %s (set TIMED_VECTORS): the shared folder is absent", dir)
		}
		tb.Fatalf("no *.jsonl vectors in %s: %v", dir, err)
	}
	var out []T
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			tb.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for line := 1; sc.Scan(); line++ {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			var v T
			at := fmt.Sprintf("%s:%d", filepath.Base(file), line)
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				tb.Fatalf("%s: %v", at, err)
			}
			if where != nil {
				where(&v, at)
			}
			out = append(out, v)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			tb.Fatal(err)
		}
	}
	return out
}
