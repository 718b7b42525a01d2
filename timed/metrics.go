package timed

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
	"github.com/timed-project/timed/tsp/udp"
)

// metrics are the Prometheus metrics, served only when --metrics-listen is
// set. A nil *metrics is valid and does nothing, so the loop never checks.
// The loop sets the gauges and counters; the packet counters are read from
// the transport at scrape time. What is a network's (its state, elections,
// rounds, slaves, loops) carries a network label (its prefix, or
// "peers"); what is the host clock's does not.
type metrics struct {
	srv         *http.Server
	state       *prometheus.GaugeVec
	elections   *prometheus.CounterVec
	loops       *prometheus.CounterVec
	corrections *prometheus.CounterVec
	refusedCorr prometheus.Counter
	alarm       prometheus.GaugeFunc
	correction  prometheus.Gauge
	frequency   prometheus.Gauge
	slaveOffset *prometheus.GaugeVec
	networkOff  *prometheus.GaugeVec
	rounds      *prometheus.CounterVec
	link        *prometheus.GaugeVec
}

func newMetrics(listen string, d *Daemon) (*metrics, error) {
	if listen == "" {
		return nil, nil
	}
	m, reg := newRegistry(d)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("metrics-listen %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	m.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.WithError(err).Error("metrics server stopped")
		}
	}()
	return m, nil
}

// newRegistry makes d's metrics and the registry /metrics serves: theirs,
// the sync state's and the transport's (read at scrape time), the Go
// runtime's and the process's. deploy/grafana/timed.json queries them.
func newRegistry(d *Daemon) (*metrics, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	m := &metrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "timed_state",
			Help: "1 for the election state the daemon is in on the network (\"ignore\": out of use), 0 for the others."}, []string{"network", "state"}),
		elections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timed_elections_total",
			Help: "Elections this daemon took part in or saw, by network."}, []string{"network"}),
		loops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timed_loops_detected_total",
			Help: "LOOPs that showed a cycle of gateways or a second master, by network."}, []string{"network"}),
		corrections: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timed_corrections_total",
			Help: "Corrections applied to the local clock, by action."}, []string{"action"}),
		refusedCorr: prometheus.NewCounter(prometheus.CounterOpts{Name: "timed_corrections_refused_total",
			Help: "Corrections refused: beyond max-step and not (yet) confirmed as towards network time, or asked again within a round of the last max-step move."}),
		correction: prometheus.NewGauge(prometheus.GaugeOpts{Name: "timed_offset_seconds",
			Help: "The last correction applied to the local clock: how far it was from the network time."}),
		frequency: prometheus.NewGauge(prometheus.GaugeOpts{Name: "timed_frequency_ppm",
			Help: "Frequency correction of the local clock."}),
		slaveOffset: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "timed_slave_offset_seconds",
			Help: "Master only: each slave's measured offset (slave minus master)."}, []string{"network", "slave"}),
		networkOff: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "timed_network_offset_seconds",
			Help: "Master only: the network time minus the master's clock, last round (0 where the master dictates)."}, []string{"network"}),
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "timed_sync_rounds_total",
			Help: "Master only: sync rounds measured, by network."}, []string{"network"}),
		link: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "timed_link_info",
			Help: "1 for each network that is one family of a link served on both (--family both): its interface and family; one election spans the link."}, []string{"network", "interface", "family"}),
	}
	m.alarm = prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "timed_alarm",
		Help: "1 while the local clock is in the max-step alarm: corrections beyond max-step are asked of it (timedc status, timedc step)."},
		func() float64 { // the Applier is safe for concurrent use
			if d.applier.Alarm().On {
				return 1
			}
			return 0
		})
	for _, rt := range d.runtimes {
		m.state.WithLabelValues(rt.label, election.StartUp.String()).Set(1)
		m.elections.WithLabelValues(rt.label)
		m.loops.WithLabelValues(rt.label)
		m.rounds.WithLabelValues(rt.label)
		if d.host.Spans(rt.i) {
			fam := "ipv4"
			if rt.network.IPv6() {
				fam = "ipv6"
			}
			m.link.WithLabelValues(rt.label, rt.network.Interface, fam).Set(1)
		}
	}
	reg.MustRegister(m.alarm, m.refusedCorr, m.state, m.elections, m.loops, m.corrections, m.correction, m.frequency, m.slaveOffset, m.networkOff, m.rounds, m.link,
		syncCollector{d}, transportCollector{d.tr}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m, reg
}

func (m *metrics) close() error {
	if m == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	return m.srv.Shutdown(ctx)
}

// setState sets network's state gauge: 1 for state, none for the others.
func (m *metrics) setState(network, state string) {
	if m == nil {
		return
	}
	m.state.DeletePartialMatch(prometheus.Labels{"network": network})
	m.state.WithLabelValues(network, state).Set(1)
}

func (m *metrics) electionSeen(network string) {
	if m != nil {
		m.elections.WithLabelValues(network).Inc()
	}
}

func (m *metrics) loopDetected(network string) {
	if m != nil {
		m.loops.WithLabelValues(network).Inc()
	}
}

func (m *metrics) corrected(a clocksync.Applied) {
	if m == nil {
		return
	}
	m.corrections.WithLabelValues(a.Action.String()).Inc()
	m.correction.Set(a.By.Seconds())
	if a.FreqChanged {
		m.frequency.Set(a.FrequencyPPM)
	}
}

func (m *metrics) refused() {
	if m != nil {
		m.refusedCorr.Inc()
	}
}

func (m *metrics) roundMeasured(network string, s syncDone) {
	if m == nil {
		return
	}
	m.rounds.WithLabelValues(network).Inc()
	m.networkOff.WithLabelValues(network).Set(s.network.Offset.Seconds())
	m.slaveOffset.DeletePartialMatch(prometheus.Labels{"network": network})
	for i, r := range s.measured {
		if r.Err == nil {
			m.slaveOffset.WithLabelValues(network, s.slaves[i].Name).Set(r.Offset.Seconds())
		}
	}
}

// syncCollector exposes the sync state, judged at scrape time from the
// facts the loop last published (sync.go), so that a host whose master
// fell silent turns unsynchronised without an event to say so.
type syncCollector struct{ d *Daemon }

var (
	syncedDesc = prometheus.NewDesc("timed_synchronised",
		"1 while the host is synchronised (docs/operating.md, \"Is it synchronised?\"): a slave that applied its master's correction within 2 sync intervals, "+
			"a master whose last round within 2 sync intervals measured a slave, or that has none; 0 otherwise, and in alarm.", nil, nil)
	corrAgeDesc = prometheus.NewDesc("timed_last_correction_age_seconds",
		"Time since the last correction applied to the local clock; absent before the first.", nil, nil)
	estOffsetDesc = prometheus.NewDesc("timed_estimated_offset_seconds",
		"The local clock minus network time, estimated now from the last round (master) or correction (slave); absent while nothing is known.", nil, nil)
	estErrorDesc = prometheus.NewDesc("timed_estimated_error_bound_seconds",
		"Bound of timed_estimated_offset_seconds's error, where this host knows it (a master); absent elsewhere.", nil, nil)
	kernelDesc = prometheus.NewDesc("timed_kernel_synchronised",
		"1 while the kernel was last told the clock is synchronised (STA_UNSYNC cleared), 0 when told it is not; "+
			"absent where the daemon leaves the kernel's state alone (not --clock system, or kernel-sync-status false).", nil, nil)
	utcDesc = prometheus.NewDesc("timed_utc_bound_seconds",
		"While synchronised to a reference (docs/operating.md, \"UTC on the LAN\"): this host's bound on its distance from UTC, the reference's kernel maxerror plus this host's "+
			"estimated offset from the reference and its error bound; the label names the reference. Absent elsewhere.", []string{"reference"}, nil)
	refErrDesc = prometheus.NewDesc("timed_reference_maxerror_seconds",
		"While synchronised to a reference: the reference's kernel maxerror, its bound on its distance from UTC, as it last announced it; the label names it.", []string{"reference"}, nil)
	claimDesc = prometheus.NewDesc("timed_reference_claiming",
		"On a reference host (--reference kernel): 1 while it claims to be a reference (the kernel says its clock is synchronised within reference-max-error), 0 otherwise; absent elsewhere.", nil, nil)
)

func (c syncCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- syncedDesc
	ch <- corrAgeDesc
	ch <- estOffsetDesc
	ch <- estErrorDesc
	ch <- kernelDesc
	ch <- utcDesc
	ch <- refErrDesc
	ch <- claimDesc
}

func (c syncCollector) Collect(ch chan<- prometheus.Metric) {
	f := c.d.syncPub.Load()
	if f == nil {
		return // not running yet
	}
	v := f.view(time.Now(), c.d.applier.Alarm())
	synced := 0.0
	if v.State == control.Synchronised {
		synced = 1
	}
	ch <- prometheus.MustNewConstMetric(syncedDesc, prometheus.GaugeValue, synced)
	if v.UTCVia != "" {
		ch <- prometheus.MustNewConstMetric(utcDesc, prometheus.GaugeValue, *v.UTCBoundSecs, v.UTCVia)
		ch <- prometheus.MustNewConstMetric(refErrDesc, prometheus.GaugeValue, *v.ReferenceMaxErrorSecs, v.UTCVia)
	}
	if f.claiming != nil {
		claiming := 0.0
		if *f.claiming {
			claiming = 1
		}
		ch <- prometheus.MustNewConstMetric(claimDesc, prometheus.GaugeValue, claiming)
	}
	if f.kernelTold != nil {
		told := 0.0
		if *f.kernelTold {
			told = 1
		}
		ch <- prometheus.MustNewConstMetric(kernelDesc, prometheus.GaugeValue, told)
	}
	for _, g := range []struct {
		desc *prometheus.Desc
		v    *float64
	}{{corrAgeDesc, v.LastCorrectionAgeSecs}, {estOffsetDesc, v.OffsetSecs}, {estErrorDesc, v.ErrorBoundSecs}} {
		if g.v != nil {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, *g.v)
		}
	}
}

// transportCollector exposes the transport's packet counters, read at
// scrape time (they are safe for concurrent use).
type transportCollector struct{ tr *udp.Transport }

var (
	packetsDesc = prometheus.NewDesc("timed_packets_total", "TSP packets by type and direction.", []string{"type", "direction"}, nil)
	dropsDesc   = prometheus.NewDesc("timed_dropped_packets_total", "Datagrams the transport dropped on receipt, by reason; each is counted under one reason only, so the reasons add up. \"own echo\": our own datagrams come back (by name, or with auth by sender identity), not an attack. \"auth <reason>\": refused by authentication (auth replayed counter, auth no echo of our nonce, auth bad MAC, ...).", []string{"reason"}, nil)
)

func (c transportCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- packetsDesc
	ch <- dropsDesc
}

func (c transportCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.tr.Stats()
	emit := func(name, dir string, n uint64) {
		ch <- prometheus.MustNewConstMetric(packetsDesc, prometheus.CounterValue, float64(n), name, dir)
	}
	for t, n := range s.Received {
		emit(t.String(), "rx", n)
	}
	for t, n := range s.Sent {
		emit(t.String(), "tx", n)
	}
	for k, n := range s.ReceivedExt {
		emit(k.String(), "rx", n)
	}
	for k, n := range s.SentExt {
		emit(k.String(), "tx", n)
	}
	for r, n := range s.DropCounts() {
		ch <- prometheus.MustNewConstMetric(dropsDesc, prometheus.CounterValue, float64(n), r)
	}
	if s.KernelDrops > 0 { // by the kernel, before the transport read them
		ch <- prometheus.MustNewConstMetric(dropsDesc, prometheus.CounterValue, float64(s.KernelDrops), kernelDropReason)
	}
}

// kernelDropReason names the kernel's receive-buffer drops among the
// transport's.
const kernelDropReason = "receive buffer full"
