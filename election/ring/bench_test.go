package ring

import (
	"fmt"
	"testing"
)

// BenchmarkElection reports, per algorithm and ring size, messages and
// bits per election and messages/(n log₂ n) on random arrangements.
func BenchmarkElection(b *testing.B) {
	for _, a := range All() {
		for _, n := range []int{16, 256, 1024} {
			b.Run(fmt.Sprintf("%s/n=%d", a.Name, n), func(b *testing.B) {
				var st Stat
				for i := range b.N {
					var err error
					if st, err = Measure(a, n, 1, uint64(i)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(st.MeanMsgs, "msgs/run")
				b.ReportMetric(st.MeanBits, "bits/run")
				b.ReportMetric(st.PerNLogN(st.MeanMsgs), "msgs/nlogn")
			})
		}
	}
}

func TestMeasure(t *testing.T) {
	st, err := Measure(ChangRoberts, 16, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Runs != 5 || st.WorstMsgs != 16*17/2+16 || st.WorstCase != "descending" {
		t.Errorf("%+v", st)
	}
}
