package limit_test

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/internal/limit"
)

// The receive path: the limiter first, before the datagram changes any
// state; refusals counted, and logged once per source.
func Example() {
	lim := limit.NewLimiter(limit.Config{Rate: 1, Burst: 2})
	log := logrus.New()
	log.SetOutput(os.Stdout)
	log.SetFormatter(&logrus.TextFormatter{DisableTimestamp: true})
	refused := limit.NewLogger(log, limit.LogConfig{Once: true})

	src := netip.MustParseAddrPort("192.0.2.7:525")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // the daemon passes time.Now()
	for range 5 {
		if !lim.Allow(src, now) {
			k := limit.Key{Msg: "rate limited", Source: src.Addr()}
			if e := refused.Entry(k, now); e != nil {
				e.Warn(k.Msg)
			}
			continue
		}
		// ... dispatch the datagram
	}
	st := lim.Stats()
	fmt.Println("allowed", st.Allowed, "refused", st.DeniedSource)
	// Output:
	// level=warning msg="rate limited" source=192.0.2.7
	// allowed 2 refused 3
}
