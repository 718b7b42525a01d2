package clocksync

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }

// Hand-computed cases of offset = ((t2−t1)+(t3−t4))/2, RTT = (t4−t1)−(t3−t2).
func TestSampleOffsetFormula(t *testing.T) {
	cases := []struct {
		name           string
		t1, t2, t3, t4 float64 // ms
		off, rtt       float64 // ms
	}{
		// Remote 100 ms ahead, 1 ms each way, 0.5 ms processing:
		// t2 = 0+1+100, t3 = 101.5, t4 = 1.5+1 = 2.5.
		{"ahead symmetric", 0, 101, 101.5, 2.5, 100, 2},
		// Remote 40 ms behind: t2 = 1−40, t3 = −39, t4 = 2.
		{"behind symmetric", 0, -39, -39, 2, -40, 2},
		// Same clock, 3 ms out and 1 ms back: offset error = (3−1)/2 = 1 ms.
		{"asymmetric path", 0, 3, 3, 4, 1, 4},
		// Slow remote processing does not enter the RTT.
		{"processing excluded", 10, 12, 512, 514, 0, 4},
	}
	for _, c := range cases {
		s := Sample{T1: at(c.t1), T2: at(c.t2), T3: at(c.t3), T4: at(c.t4)}
		if got, want := s.Offset(), time.Duration(c.off*1e6); got != want {
			t.Errorf("%s: offset %v, want %v", c.name, got, want)
		}
		if got, want := s.RTT(), time.Duration(c.rtt*1e6); got != want {
			t.Errorf("%s: rtt %v, want %v", c.name, got, want)
		}
	}
}

func TestBestSample(t *testing.T) {
	samples := []Sample{
		{T1: at(0), T2: at(105), T3: at(105), T4: at(10)},  // rtt 10, offset 100
		{T1: at(20), T2: at(121), T3: at(121), T4: at(22)}, // rtt 2, offset 100
		{T1: at(30), T2: at(140), T3: at(135), T4: at(40)}, // t3 < t2: invalid
		{T1: at(50), T2: at(153), T3: at(153), T4: at(54)}, // rtt 4, offset 101
	}
	m, err := BestSample(samples, 6)
	if err != nil {
		t.Fatal(err)
	}
	if m.Offset != 100*time.Millisecond || m.RTT != 2*time.Millisecond || m.ErrorBound != time.Millisecond || m.Samples != 3 || m.Sent != 6 || !m.At.Equal(at(22)) {
		t.Fatalf("best = %+v", m)
	}
	if _, err := BestSample(nil, 3); !errors.Is(err, ErrNoReply) {
		t.Fatalf("no samples: %v", err)
	}
	if _, err := BestSample(samples[2:3], 1); !errors.Is(err, ErrBadSample) {
		t.Fatalf("only invalid: %v", err)
	}
}

func TestMeasureAllDeadline(t *testing.T) {
	var hosts []netip.AddrPort
	for i := range 20 {
		hosts = append(hosts, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}), 525))
	}
	m := MeasurerFunc(func(ctx context.Context, h netip.AddrPort) (Measurement, error) {
		if h.Addr().As4()[3] == 7 { // one host never answers in time
			<-ctx.Done()
			return Measurement{}, ctx.Err()
		}
		return Measurement{Offset: time.Duration(h.Addr().As4()[3]) * time.Millisecond}, nil
	})
	start := time.Now()
	res := MeasureAll(context.Background(), m, hosts, time.Now().Add(200*time.Millisecond), 4)
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("round took %v past its deadline", el)
	}
	for i, r := range res {
		if r.Host != hosts[i] {
			t.Fatalf("result %d is for %v", i, r.Host)
		}
		if i == 7 {
			if !errors.Is(r.Err, context.DeadlineExceeded) {
				t.Fatalf("host 7: %v", r.Err)
			}
			continue
		}
		if r.Err != nil || r.Offset != time.Duration(i)*time.Millisecond {
			t.Fatalf("host %d: %+v", i, r)
		}
	}
}
