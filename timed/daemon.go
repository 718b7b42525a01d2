package timed

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/config"
	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/election/ring/live"
	"github.com/timed-project/timed/internal/limit"
	"github.com/timed-project/timed/timed/control"
	"github.com/timed-project/timed/tsp"
	"github.com/timed-project/timed/tsp/udp"
)

// Daemon is one running timed.
type Daemon struct {
	cfg      *config.Config
	log      *logrus.Logger
	hostname string
	tr       *udp.Transport
	host     *election.Host // the election on every served network
	runtimes []*netRuntime  // one per served network, the Host's order (runtime.go)
	clock    clocksync.Clock
	applier  *clocksync.Applier
	probe    *clocksync.ProbeClient
	// rtt is the master's memory of its slaves' round trips, by address:
	// what tells a delayed sample from the path's usual (clocksync
	// outliers), and where the probe's adaptive count finds each path's
	// floor; bounded by the slave tables' size.
	rtt      *clocksync.RTTHistory
	respond  *clocksync.ProbeResponder
	measurer clocksync.Measurer
	icmp     *clocksync.ICMPMeasurer // nil without CAP_NET_RAW
	ctl      *control.Server
	metrics  *metrics

	timerCh  chan timerFire
	syncCh   chan syncDone
	ctlCh    chan ctlCall
	reloadCh chan reloadCall
	callCh   chan func() // closures scheduled with after, run by the loop

	// roundCtx is cancelled at shutdown, ending measurements in flight;
	// rounds counts them so that Run returns only when all are done.
	roundCtx    context.Context
	cancelRound context.CancelFunc
	rounds      sync.WaitGroup

	// driftPath is the drift file (drift.go), "" for none or without a
	// frequency discipline; driftEvery how often it is saved.
	driftPath  string
	driftEvery time.Duration

	st        status                    // what `timedc status` shows; owned by the loop
	ks        kernelSync                // the kernel's sync state (kernelsync.go); owned by the loop
	ref       *reference                // --reference kernel (reference.go); nil when off; owned by the loop
	syncPub   atomic.Pointer[syncFacts] // the loop's sync facts, for the metrics server (sync.go)
	ring      *live.Runner              // live ring elections (ring.go); owned by the loop
	quit      context.CancelFunc        // ends Run (control socket's quit)
	trustGen  uint64                    // the -F list in force; older retries stop
	local     localAddrs                // this host's addresses (admin.go): admin packets, our peer entry
	stateLock *os.File                  // the state directory's lock (auth.go), held until closeResources
	dates     dateForwards              // date requests sent up to the master (date.go)
	// bsdCompat (--bsd-compat, tests only): behave as a BSD daemon on the
	// wire, which drops version 2 (extensions) unread and sends none.
	bsdCompat bool
	// Lines about what others sent are rate-limited: refusals of the
	// election machine once a minute per kind and source, refused admin
	// packets once per source, networks ignored and loops detected a few
	// a minute; all flushed with their counts (flushLogs).
	refusedLog, refusedOnce, netLog *limit.Logger
}

// Options are what a caller may supply instead of the defaults.
type Options struct {
	// Clock overrides the clock named by the configuration (tests).
	Clock clocksync.Clock
	// Seed seeds the election's randomness; 0 draws one.
	Seed uint64
	// BSDCompat (timed's hidden --bsd-compat, for tests) makes the daemon
	// look like BSD's on the wire: it drops every version-2 datagram
	// unread and sends none, so it neither answers nor sends our clock
	// probe (it measures by ICMP timestamps, and is measured so) nor
	// takes part in ring elections. Everything else, the control socket
	// included, is as usual.
	BSDCompat bool
}

// New builds a daemon from its configuration: it opens the transport and
// the control socket, so the errors a sysadmin must act on (privileged
// port, socket directory, bad clock) come from here, before Run.
func New(cfg *config.Config, log *logrus.Logger, opt Options) (_ *Daemon, err error) {
	d := &Daemon{
		cfg:       cfg,
		log:       log,
		bsdCompat: opt.BSDCompat,
		timerCh:   make(chan timerFire, 16),
		syncCh:    make(chan syncDone, 1),
		ctlCh:     make(chan ctlCall),
		reloadCh:  make(chan reloadCall),
		callCh:    make(chan func(), 16),
	}
	defer func() {
		if err != nil {
			d.closeResources()
		}
	}()
	d.hostname = cfg.Hostname
	if d.hostname == "" {
		if d.hostname, err = os.Hostname(); err != nil {
			return nil, fmt.Errorf("host name: %w (set --hostname)", err)
		}
	}
	d.hostname = tsp.TruncateName(d.hostname)
	if d.hostname == "" || !tsp.ValidName(d.hostname) {
		// Receivers drop packets whose name is not a host name.
		return nil, fmt.Errorf("invalid hostname %q: accepted: printable ASCII without spaces (set --hostname)", d.hostname)
	}

	d.clock = opt.Clock
	if d.clock == nil {
		if d.clock, err = clocksync.ParseClock(cfg.Clock, nil); err != nil {
			return nil, fmt.Errorf("clock: %w", err)
		}
	}
	if cfg.Sync.Reference {
		d.ref = &reference{health: refHealth{maxErr: cfg.Sync.ReferenceMaxError, hold: cfg.Sync.ReferenceHold}}
	}
	if sys, ok := d.clock.(*clocksync.SystemClock); ok && d.ref == nil {
		// Fail at start-up, not at the first correction, when the clock
		// cannot be disciplined. The check only reads our capabilities.
		if err := sys.CheckPermission(); err != nil {
			return nil, fmt.Errorf("clock %s: %w", cfg.Clock, err)
		}
	}
	d.applier = &clocksync.Applier{Clock: d.clock, StepThreshold: localStepThreshold(cfg), MaxStep: cfg.Sync.MaxStep, Log: log,
		// In alarm, at most one max-step move per round, and round
		// jitter does not skip one (clocksync's default is ¾ of BSD's).
		RecoveryInterval: cfg.Election.SyncInterval * 3 / 4,
		// Stepped, not slewed, until synchronised (makestep-*).
		MakeStep: clocksync.MakeStep{Threshold: cfg.Sync.MakeStepThreshold, Count: cfg.Sync.MakeStepCount}}
	// A reference's kernel state and frequency are its own program's.
	d.ks = kernelSync{k: kernelSyncerOf(d.clock, cfg.Sync.KernelSyncStatus && d.ref == nil), dirty: true}
	if d.ref != nil {
		log.WithFields(logrus.Fields{"reference_max_error": cfg.Sync.ReferenceMaxError, "reference_hold": cfg.Sync.ReferenceHold}).
			Info("reference: this host's clock is kept by another program; timed never changes it")
	} else if cfg.Sync.FrequencyDiscipline {
		// A baseline of most of the shortest round: corrections closer
		// together (a retransmitted ADJTIME, a forced round) say little
		// about the rate.
		dc := clocksync.DisciplineConfig{MinInterval: shortestRound(cfg) * 3 / 4}
		d.driftPath, d.driftEvery = cfg.Sync.DriftFile, driftSaveEvery
		dc.InitialPPM = d.initialFrequency() // the drift file's, or what the kernel has learnt
		d.applier.Discipline = clocksync.NewDiscipline(dc)
	} else if cfg.Sync.DriftFile != "" {
		log.WithField("drift_file", cfg.Sync.DriftFile).Warn("drift-file ignored: with frequency-discipline off there is no estimate to keep")
	}

	peers, err := resolvePeers(cfg.Peers)
	if err != nil {
		return nil, err
	}
	signer, verifier, err := d.authParts(cfg.Auth)
	if err != nil {
		return nil, err
	}
	d.tr, err = udp.Listen(udp.Config{
		Port:       cfg.Port,
		Interfaces: cfg.Interfaces,
		UseOnly:    cfg.Networks,
		Ignore:     cfg.IgnoreNetworks,
		Family:     cfg.Family,
		Group:      cfg.IPv6Group,
		Peers:      peers,
		Hostname:   d.hostname,
		Logger:     log.WithField("component", "tsp"),
		Signer:     signer,
		Verifier:   verifier,
	})
	if err != nil {
		return nil, errors.Join(err, signer.Close(), verifier.Close())
	}
	// Every network the transport serves (-n/-i and the interface
	// template chose them; peers mode is one) is the Host's: one election
	// machine each, BSD's rules across them.
	nets := d.tr.Networks()
	seed := opt.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	cfgs := electionConfigs(cfg.Election, d.hostname, nets, len(d.tr.Peers()), d.tr.LocalAddr().Port())
	if d.host, err = election.NewHost(cfgs, rand.New(rand.NewPCG(seed, seed^0x5eed))); err != nil {
		return nil, fmt.Errorf("election: %w", err)
	}
	// One memory of round trips for the whole host: the rounds of every
	// network record it (hosts are told apart by address), and the probe
	// reads its floors from it.
	d.rtt = clocksync.NewRTTHistory(d.cfg.Election.MaxSlaves * len(nets))
	for i, n := range nets {
		d.runtimes = append(d.runtimes, newNetRuntime(d, i, n))
	}

	d.probe = clocksync.NewProbeClient(extSender{d.tr}, d.clock, d.hostname, clocksync.ProbeConfig{History: d.rtt})
	d.respond = clocksync.NewProbeResponder(d.clock, d.hostname)
	d.measurer = d.probe
	icmp, icmpErr := clocksync.NewICMPMeasurer(d.clock, clocksync.ICMPConfig{})
	switch {
	case icmpErr == nil && d.bsdCompat:
		d.icmp, d.measurer = icmp, icmp // BSD measures by ICMP only
	case icmpErr == nil:
		d.icmp = icmp
		d.measurer = newFallbackMeasurer(d.probe, icmp)
	case d.bsdCompat:
		d.measurer = noMeasurer{icmpErr}
		log.WithError(icmpErr).Warn("bsd-compat: ICMP timestamps unavailable: no slave can be measured")
	default:
		log.WithError(icmpErr).Info("ICMP timestamps unavailable: only daemons answering the probe can be measured")
	}
	if d.bsdCompat {
		log.Warn("bsd-compat: version-2 datagrams (clock probe, ring elections) are dropped and never sent")
	}

	if cfg.ControlSocket != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.ControlSocket), 0o750); err != nil {
			return nil, fmt.Errorf("control socket directory: %w", err)
		}
		if d.ctl, err = control.Listen(cfg.ControlSocket, d.handleControl); err != nil {
			return nil, err
		}
	}
	if d.metrics, err = newMetrics(cfg.MetricsListen, d); err != nil {
		return nil, err
	}
	d.roundCtx, d.cancelRound = context.WithCancel(context.Background())
	d.refusedLog = limit.NewLogger(log, limit.LogConfig{})
	d.refusedOnce = limit.NewLogger(log, limit.LogConfig{Once: true})
	d.netLog = limit.NewLogger(log, limit.LogConfig{Lines: 5})
	d.ring = newRingRunner(d)
	d.st.init(d)
	if err := d.applyTrusted(cfg.Trusted); err != nil {
		return nil, err
	}
	return d, nil
}

// localStepThreshold is where this host steps its clock instead of
// slewing: at the configured step threshold (BSD 20 s), or sooner when a
// slew at adjtime's 500 ppm could not finish before the next round (the
// shortest, with adaptive rounds: 4 ms in the default 8 s floor): the
// next correction would replace it unfinished, round after round, and the
// clock would never catch up (240 s rounds slew at most 120 ms).
func localStepThreshold(cfg *config.Config) time.Duration {
	slewable := time.Duration(float64(shortestRound(cfg)) * clocksync.MaxSlewPPM / 1e6)
	return max(min(cfg.Sync.StepThreshold, slewable), time.Microsecond)
}

// shortestRound is the shortest interval between two rounds: the floor
// of adaptive rounds (sync-interval-min), the sync-interval otherwise.
// A slave configured like its master expects corrections that often.
func shortestRound(cfg *config.Config) time.Duration {
	if f := cfg.Sync.IntervalFloor; f > 0 && f < cfg.Election.SyncInterval {
		return f
	}
	return cfg.Election.SyncInterval
}

// resolvePeers turns the peers entries (host:port, [IPv6]:port,
// [fe80::1%eth0]:port) into addresses, once, at start-up; a host name
// takes its first address, of either family.
func resolvePeers(list []string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, p := range list {
		a, host, err := udp.ParsePeer(p)
		if err != nil {
			return nil, fmt.Errorf("peers: %w", err)
		}
		if host != "" {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
			cancel()
			if err != nil || len(addrs) == 0 {
				return nil, fmt.Errorf("peers: %s: resolve %s: %w", p, host, err)
			}
			a = netip.AddrPortFrom(addrs[0].Unmap(), a.Port())
		}
		out = append(out, a)
	}
	return out, nil
}

// Hostname is the name the daemon sends in its packets.
func (d *Daemon) Hostname() string { return d.hostname }

// LocalAddr is the transport's bound address (its port, for tests that
// listen on a kernel-chosen one).
func (d *Daemon) LocalAddr() netip.AddrPort { return d.tr.LocalAddr() }

// closeResources releases what New opened; safe on a half-built daemon.
func (d *Daemon) closeResources() {
	var errs []error
	if d.metrics != nil {
		errs = append(errs, d.metrics.close())
	}
	if d.ctl != nil {
		errs = append(errs, d.ctl.Close())
	}
	if d.tr != nil {
		errs = append(errs, d.tr.Close())
	}
	if d.icmp != nil {
		errs = append(errs, d.icmp.Close())
	}
	if d.stateLock != nil {
		errs = append(errs, d.stateLock.Close()) // after the transport saved the auth state
	}
	if err := errors.Join(errs...); err != nil {
		d.log.WithError(err).Warn("closing")
	}
}

// extSender lets the probe client send through the transport.
type extSender struct{ tr *udp.Transport }

func (s extSender) WriteExt(p tsp.ExtPacket, to netip.AddrPort) error { return s.tr.SendExt(&p, to) }

// WriteExtStamped sends with the kernel's transmit timestamp, for the
// probe's send times.
func (s extSender) WriteExtStamped(p tsp.ExtPacket, to netip.AddrPort) (time.Time, bool, error) {
	return s.tr.SendExtStamped(&p, to)
}

// Run runs the daemon until ctx is cancelled, then stops within a second:
// it tells the machine to stop, ends measurements in flight and closes the
// sockets.
func (d *Daemon) Run(ctx context.Context) error {
	defer d.closeResources()
	ctx, d.quit = context.WithCancel(ctx)
	defer d.quit()
	networks := make([]string, len(d.runtimes))
	for i, rt := range d.runtimes {
		networks[i] = rt.network.String()
	}
	d.log.WithFields(logrus.Fields{"name": d.hostname, "network": strings.Join(networks, "; "), "addr": d.tr.LocalAddr().String(),
		"clock": d.cfg.Clock, "master": d.cfg.MayBeMaster}).Info("timed starting")
	d.checkReference() // the claim the election starts from
	d.carryOut(d.host.Start(d.now()), time.Time{})
	d.flushLogs()
	d.tellKernel()
	d.publishSync()
	notifyReady(d)
	d.saveDriftEvery(d.driftEvery)
	d.tellKernelEvery(kernelSyncEvery(d.cfg.Election.SyncInterval))
	d.checkReferenceEvery(refCheckEvery(d.cfg.Election.SyncInterval))
	watchdog := newWatchdog()
	defer watchdog.Stop()
	packets := d.tr.Packets()
	for {
		select {
		case <-ctx.Done():
			d.shutdown()
			return nil
		case r, ok := <-packets:
			if !ok {
				d.shutdown()
				return errors.New("transport closed")
			}
			d.receive(r)
		case f := <-d.timerCh:
			f.rt.fire(f)
		case s := <-d.syncCh:
			s.rt.syncFinished(s)
		case c := <-d.ctlCh:
			c.reply <- d.control(c.req)
		case fn := <-d.callCh:
			fn()
		case r := <-d.reloadCh:
			r.reply <- d.reload(r.cfg)
		case <-watchdog.C():
			notifyWatchdog(d)
		}
		d.tellKernel()
		d.publishSync()
	}
}

func (d *Daemon) shutdown() {
	notifyStopping()
	d.stopAll()
	d.cancelRound()
	d.rounds.Wait()
	d.saveDrift()
	d.kernelUnsynced()
	d.log.Info("timed stopped")
}
