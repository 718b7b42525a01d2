package ring

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// Golden scripts: a whole small election, one line per step (virtual time,
// node, event, actions), that a reader can follow against the paper. A
// change in behaviour shows up as a diff.
func TestGoldenTraces(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
	}{
		{"chang-roberts-3", Config{Algorithm: ChangRoberts, IDs: []uint64{2, 3, 1}, Schedule: Synchronous}},
		{"vlt-half-self-1324", Config{Algorithm: VanLeeuwenTan(false, InaugurateSelf), IDs: []uint64{1, 3, 2, 4}, Schedule: Synchronous}},
		{"vlt-full-register-async-6", Config{Algorithm: VanLeeuwenTan(true, InaugurateRegister), IDs: []uint64{4, 1, 6, 3, 5, 2}, Schedule: Asynchronous, Seed: 9, Flip: []bool{false, true, true, false, false, true}}},
		{"peterson-1324567", Config{Algorithm: Peterson, IDs: []uint64{1, 3, 2, 4, 5, 6, 7}, Schedule: Synchronous}},
		{"vitanyi-sync-312", Config{Algorithm: Vitanyi(Pow2, 1, true), IDs: []uint64{3, 1, 2}, Schedule: Synchronous}},
		{"afek-gafni-async-4", Config{Algorithm: AfekGafniAsync, IDs: []uint64{2, 4, 1, 3}, Schedule: Asynchronous, Seed: 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b strings.Builder
			c.cfg.Trace = func(s string) { b.WriteString(s + "\n") }
			r, err := Run(c.cfg)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(resultLine(r))
			path := filepath.Join("testdata", c.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if got := b.String(); got != string(want) {
				t.Errorf("trace differs from %s:\n%s", path, got)
			}
		})
	}
}

func resultLine(r Result) string {
	return strings.Join([]string{
		"leader", itoa(r.Leader), "messages", itoa(uint64(r.Messages)), "announce", itoa(uint64(r.Announce)),
		"bits", itoa(uint64(r.Bits)), "ringsize", itoa(uint64(r.RingSize)),
	}, " ") + "\n"
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for ; v > 0; v /= 10 {
		b = append([]byte{byte('0' + v%10)}, b...)
	}
	return string(b)
}
