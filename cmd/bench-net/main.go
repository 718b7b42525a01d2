// Command bench-net measures timed on a real network: for each N and
// each profile (the defaults, the fast profile, BSD-equivalent
// settings) it starts N daemons (bin/timed, all may be master) in N
// network namespaces on one bridge, each on a simulated clock with a
// random offset (±0.5 s) and drift, wandering as a typical crystal's
// (clocksync.TypicalOscillator; -wander 0 -temp 0 for constant drifts),
// releases them at the same instant, and samples every daemon's `timedc
// status` every second for -duration. It prints a table per N, a column
// per profile beside BSD's figures: the time to one master, the steady
// spread of the clocks (p50/p95/max over the run's last -steady), the
// time until the spread stays under 1 ms and under 100 µs, packets per
// slave per minute (whole run, steady window) and per sync round, and
// RSS and CPU per daemon; and it plots the spread over time, a panel per
// N and a line per profile, as a PNG (-png).
//
//	make build && sudo go run ./cmd/bench-net -bin bin -n 5,20,50
//
// It needs root (ip netns, veth, bridge). Every namespace, link and file
// it makes carries the run's random id and is removed when it returns,
// on failure or Ctrl-C too; the daemons die with it even if it is killed
// (SIGKILL on parent death).
package main

import (
	"context"
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/timed-project/timed/bench/flood"
	"github.com/timed-project/timed/bench/netbench"
	"github.com/timed-project/timed/clocksync"
	"github.com/timed-project/timed/timed/control"
)

// opts are the flags.
type opts struct {
	bin       string
	ns        []int
	families  []netbench.Family
	profiles  []netbench.Profile
	duration  time.Duration
	steady    time.Duration
	png       string
	series    string
	seed      uint64
	offset    time.Duration
	drift     float64
	osc       clocksync.Oscillator
	every     time.Duration
	keepLogs  string
	masterMax time.Duration
	load      int
}

func main() {
	var o opts
	list := flag.String("n", "5,20,50", "daemon counts, comma-separated: one run each")
	fams := flag.String("family", "ipv4", "address families of the links, comma-separated (ipv4, ipv6): one run per family and N; ipv6 links hold IPv6 only (link-local and unique-local, nodad), and the daemons find each other through the link-local group")
	flag.StringVar(&o.bin, "bin", "bin", "directory holding timed (make build)")
	profs := flag.String("profile", "defaults,fast,bsd", "daemon settings, comma-separated, a run each per N, in this order: defaults (adaptive rounds, 8 s up to 240 s), fast (--profile fast: fixed 4 s rounds), bsd (BSD-equivalent: fixed 240 s rounds, no frequency discipline, no makestep, no influence bound)")
	flag.DurationVar(&o.duration, "duration", 6*time.Minute, "how long each run lasts after the release")
	flag.DurationVar(&o.steady, "steady", 4*time.Minute, "the steady window: the run's last this long (at most -duration)")
	flag.StringVar(&o.png, "png", "bench-net.png", "plot of the spread over time, a panel per N and a line per profile (empty: none)")
	flag.StringVar(&o.series, "series", "", "write every run's spread over time to this CSV file: profile, N, family, seconds since the release, spread in seconds (empty: none)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the clocks' offsets and drifts")
	flag.DurationVar(&o.offset, "offset", 500*time.Millisecond, "clocks start up to this far from the kernel clock, either way")
	flag.Float64Var(&o.drift, "drift", 50, "clocks drift up to this many ppm, either way")
	flag.Float64Var(&o.osc.WanderPPM, "wander", clocksync.TypicalWanderPPM, "random walk of each clock's frequency: its Allan deviation at 1000 s, ppm (0: none; default a typical crystal's)")
	flag.Float64Var(&o.osc.TempPPM, "temp", clocksync.TypicalTempPPM, "periodic (temperature) swing of each clock's frequency, ±ppm (0: none)")
	flag.DurationVar(&o.osc.TempPeriod, "temp-period", clocksync.TypicalTempPeriod, "period of the temperature swing")
	flag.DurationVar(&o.every, "every", time.Second, "how often every daemon is sampled once there is a master")
	flag.DurationVar(&o.masterMax, "master-timeout", 90*time.Second, "give up on an N that has no master this long after the start")
	flag.IntVar(&o.load, "load", 0, "busy-loop processes beside the daemons while they run (0 to 64): a loaded host (issue 20: 2 on 2 cores)")
	flag.StringVar(&o.keepLogs, "logs", "", "keep the daemons' logs in this directory (default: removed)")
	flag.Parse()
	for _, s := range strings.Split(*list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err == nil {
			err = netbench.Check(n)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-net: -n %q: %v\n", *list, err)
			os.Exit(2)
		}
		o.ns = append(o.ns, n)
	}
	for _, s := range strings.Split(*fams, ",") {
		f, err := netbench.ParseFamily(strings.TrimSpace(s))
		if err == nil && f == netbench.Dual {
			err = errors.New("dual is not a benchmark family: a dual-stack link is served on IPv4")
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench-net: -family %q: %v\n", *fams, err)
			os.Exit(2)
		}
		o.families = append(o.families, f)
	}
	var err error
	if o.profiles, err = netbench.ParseProfiles(*profs); err != nil {
		fmt.Fprintf(os.Stderr, "bench-net: -profile %q: %v\n", *profs, err)
		os.Exit(2)
	}
	if err := netbench.CheckLoad(o.load); err != nil {
		fmt.Fprintln(os.Stderr, "bench-net: -load:", err)
		os.Exit(2)
	}
	if o.duration <= 0 || o.steady <= 0 || o.steady > o.duration || o.every <= 0 || o.offset < 0 || o.drift < 0 {
		fmt.Fprintln(os.Stderr, "bench-net: -duration, -steady and -every must be positive, -steady at most -duration; -offset and -drift not negative")
		os.Exit(2)
	}
	o.osc.Seed = o.seed
	if err := o.osc.Check(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-net: -wander, -temp, -temp-period:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench-net:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o opts) error {
	timed, err := filepath.Abs(filepath.Join(o.bin, "timed"))
	if err != nil {
		return err
	}
	if _, err := os.Stat(timed); err != nil {
		return fmt.Errorf("%w (run `make build` first, or give -bin)", err)
	}
	if os.Geteuid() != 0 {
		return errors.New("needs root: it makes network namespaces, veths and a bridge")
	}
	load := "unknown"
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			load = strings.Join(f[:3], " ")
		}
	}
	names := make([]string, len(o.profiles))
	for i, p := range o.profiles {
		names[i] = p.Name
	}
	fmt.Printf("bench-net: N daemons (%s) in N network namespaces on one bridge, all -M; profiles %s, a run each; simulated clocks:\n", timed, strings.Join(names, ", "))
	fmt.Printf("offsets uniform in ±%v, drifts in ±%g ppm (seed %d), wandering by %g ppm (Allan deviation at 1000 s) and ±%g ppm over %v;\nall released at once; every daemon sampled every %v for %v;\n",
		o.offset, o.drift, o.seed, o.osc.WanderPPM, o.osc.TempPPM, o.osc.TempPeriod, o.every, o.duration)
	fmt.Printf("steady window: the run's last %v. %d CPUs, load %s\n", o.steady, runtime.NumCPU(), load)
	var rs []netbench.Result
	var panels []netbench.Panel
	var rows [][]string
	for _, n := range o.ns {
		for _, f := range o.families {
			pn := netbench.Panel{Title: fmt.Sprintf("N = %d, spread after a simultaneous start", n)}
			if len(o.families) > 1 {
				pn.Title = fmt.Sprintf("N = %d on %v, spread after a simultaneous start", n, f)
			}
			for _, p := range o.profiles {
				if ctx.Err() != nil {
					break
				}
				r, ss := runN(ctx, o, timed, n, f, p)
				if r.Err != nil {
					fmt.Fprintf(os.Stderr, "N=%d %v %s: %v\n", n, f, p.Name, r.Err)
				}
				rs = append(rs, r)
				series := netbench.Series(ss)
				pn.Lines = append(pn.Lines, netbench.Line{Label: p.Label, Points: series})
				for _, pt := range series {
					rows = append(rows, []string{p.Name, strconv.Itoa(n), f.String(),
						strconv.FormatFloat(pt.At.Seconds(), 'f', 3, 64), strconv.FormatFloat(pt.Spread, 'g', 6, 64)})
				}
			}
			panels = append(panels, pn)
		}
	}
	for _, n := range o.ns {
		var of []netbench.Result
		for _, r := range rs {
			if r.N == n {
				of = append(of, r)
			}
		}
		if len(of) > 0 {
			fmt.Printf("\n%s", netbench.Table(of))
		}
	}
	if len(rs) > 0 {
		fmt.Println("\nspread: max − min over the daemons of each one's simulated clock minus the kernel clock; rounds: where they are fixed;")
		fmt.Println("packets: the slaves' TSP and probe packets, sent and received, per slave: per minute from the release to the end (whole run)")
		fmt.Println("and over the steady window, without LOOP; per sync round over the steady window (the master's count of rounds).")
	}
	if o.png != "" && len(panels) > 0 {
		if err := netbench.WritePlot(o.png, panels); err != nil {
			return err
		}
		fmt.Println("plot:", o.png)
	}
	if o.series != "" && len(rows) > 0 {
		if err := writeCSV(o.series, rows); err != nil {
			return err
		}
		fmt.Println("series:", o.series)
	}
	return ctx.Err()
}

// writeCSV writes the spread series, a header first.
func writeCSV(file string, rows [][]string) error {
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("series: %w", err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"profile", "n", "family", "seconds", "spread_seconds"})
	_ = w.WriteAll(rows) // flushes
	if err := errors.Join(w.Error(), f.Close()); err != nil {
		return fmt.Errorf("series %s: %w", file, err)
	}
	return nil
}

// daemon is one timed in its namespace.
type daemon struct {
	name, ns, sock, log string
	metrics             string // host:port of its metrics, in ns
	cmd                 *exec.Cmd
	release             io.WriteCloser // closing it lets the daemon start
	done                chan struct{}
}

// runN is one N on links of one family with one profile: its network,
// its daemons, its samples and figures. It returns the samples too.
func runN(ctx context.Context, o opts, timed string, n int, fam netbench.Family, p netbench.Profile) (r netbench.Result, ss []netbench.Sample) {
	r.N, r.Family, r.Profile, r.Interval = n, fam, p, p.Interval
	r.Figures = netbench.Analyze(nil, 0, 0)
	names, err := netbench.NewNames()
	if err != nil {
		r.Err = err
		return r, nil
	}
	began := time.Now()
	nt, err := netbench.Setup(ctx, names, n)
	defer func() {
		if err := nt.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "N=%d: cleanup: %v\n", n, err)
		}
		if left, err := netbench.Left(names); err != nil || len(left) > 0 {
			fmt.Fprintf(os.Stderr, "N=%d: left behind: %v %v\n", n, left, err)
		}
	}()
	if err != nil {
		r.Err = fmt.Errorf("network: %w", err)
		return r, nil
	}
	if fam != netbench.IPv4 {
		for i := range n {
			if err := nt.Readdress(ctx, i, fam); err != nil {
				r.Err = fmt.Errorf("network: %w", err)
				return r, nil
			}
		}
	}
	dir, err := os.MkdirTemp("", "bench-net-"+names.Run)
	if err != nil {
		r.Err = err
		return r, nil
	}
	defer os.RemoveAll(dir)
	fmt.Fprintf(os.Stderr, "N=%d %s: run %s: network up in %.1f s\n", n, p.Name, names.Run, time.Since(began).Seconds())

	load, err := netbench.StartLoad(o.load)
	defer load.Stop()
	if err != nil {
		r.Err = err
		return r, nil
	}
	life, end := context.WithCancel(ctx)
	ds, err := start(life, timed, dir, names, fam, p, netbench.Clocks(o.seed, n, o.offset, o.drift, o.osc))
	defer stop(end, ds, o.keepLogs)
	if err != nil {
		r.Err = err
		return r, nil
	}
	t0 := time.Now()
	for _, d := range ds {
		d.release.Close() // the shell's read ends, and it execs timed
	}
	ss, err = observe(ctx, o, ds, t0)
	switch {
	case ctx.Err() != nil:
		r.Err = errors.New("interrupted")
	case err != nil:
		r.Err = err
	}
	r.Figures = netbench.Analyze(ss, o.steady, o.steady)
	r.Unsettled = !r.Settled1ms
	var rss []float64
	for _, d := range ds {
		if m, err := flood.ReadMem(d.cmd.Process.Pid); err == nil {
			rss = append(rss, float64(m.RSS))
		}
	}
	if len(rss) > 0 {
		r.RSSMedian, r.RSSMax = uint64(netbench.Percentile(rss, 50)), uint64(slices.Max(rss))
	}
	return r, ss
}

// start starts one daemon per namespace, each held by a shell until its
// release is closed, so that all begin within a few milliseconds. Ending
// life stops them: SIGTERM, and SIGKILL 3 s later.
func start(life context.Context, timed, dir string, names netbench.Names, fam netbench.Family, p netbench.Profile, clocks []netbench.Clock) ([]*daemon, error) {
	conf := filepath.Join(dir, "empty.yaml") // not the host's /etc/timed/timed.yaml
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		return nil, err
	}
	var ds []*daemon
	for i, c := range clocks {
		at := names.Addr(i)
		if fam == netbench.IPv6 {
			at = names.Addr6(i)
		}
		d := &daemon{name: names.Host(i), ns: names.Netns(i), done: make(chan struct{}),
			metrics: net.JoinHostPort(at.String(), "9525")}
		d.sock, d.log = filepath.Join(dir, d.name+".sock"), filepath.Join(dir, d.name+".log")
		f, err := os.Create(d.log)
		if err != nil {
			return ds, err
		}
		args := append([]string{"netns", "exec", d.ns, "/bin/sh", "-c", `read x; exec "$0" "$@"`, timed, "-M"}, p.Args...)
		args = append(args, "--config", conf, "--hostname", d.name, "--clock", c.Spec(),
			"--control-socket", d.sock, "--metrics-listen", d.metrics, "--log-level", "info")
		d.cmd = exec.CommandContext(life, "ip", args...)
		d.cmd.Stdout, d.cmd.Stderr = f, f
		d.cmd.Cancel = func() error { return d.cmd.Process.Signal(syscall.SIGTERM) }
		d.cmd.WaitDelay = 3 * time.Second
		// Its own process group: a Ctrl-C is ours to handle, in order.
		// SIGKILL if we die without stopping it.
		d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if d.release, err = d.cmd.StdinPipe(); err != nil {
			f.Close()
			return ds, err
		}
		err = d.cmd.Start()
		f.Close()
		if err != nil {
			return ds, fmt.Errorf("start %s: %w", d.name, err)
		}
		ds = append(ds, d)
		go func() {
			_ = d.cmd.Wait()
			close(d.done)
		}()
	}
	return ds, nil
}

// stop ends the daemons' life and waits for them all to exit. With keep,
// it copies their logs there.
func stop(end context.CancelFunc, ds []*daemon, keep string) {
	end()
	for _, d := range ds {
		<-d.done
	}
	if keep == "" {
		return
	}
	if err := os.MkdirAll(keep, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "logs:", err)
		return
	}
	for _, d := range ds {
		if b, err := os.ReadFile(d.log); err == nil {
			_ = os.WriteFile(filepath.Join(keep, filepath.Base(d.ns)+".log"), b, 0o644)
		}
	}
}

// observe samples the daemons from t0: every 100 ms until one master,
// then every o.every, until o.duration has passed.
func observe(ctx context.Context, o opts, ds []*daemon, t0 time.Time) (ss []netbench.Sample, err error) {
	var masterAt time.Duration
	period := 100 * time.Millisecond
	next := t0
	for {
		next = next.Add(period)
		select {
		case <-ctx.Done():
			return ss, ctx.Err()
		case <-time.After(time.Until(next)):
		}
		for _, d := range ds {
			select {
			case <-d.done:
				return ss, fmt.Errorf("%s exited: %s", d.name, tail(d.log))
			default:
			}
		}
		s, sts := sample(ctx, ds, t0)
		ss = append(ss, s)
		if s.Master < 0 && masterAt == 0 {
			if s.At > o.masterMax {
				return ss, fmt.Errorf("no master %v after the start", o.masterMax)
			}
			continue
		}
		if masterAt == 0 {
			masterAt, period = s.At, o.every
			var iv time.Duration
			if sy := sts[s.Master].Sync; sy != nil {
				iv = time.Duration(sy.SyncIntervalSecs * float64(time.Second))
			}
			fmt.Fprintf(os.Stderr, "N=%d: one master (%s) %.1f s after the start; sync interval %v\n",
				len(ds), ds[s.Master].name, s.At.Seconds(), iv)
		}
		if s.At >= o.duration {
			return ss, nil
		}
	}
}

// sample polls every daemon at once (so that the offsets are read within
// milliseconds of each other), and the master's metrics.
func sample(ctx context.Context, ds []*daemon, t0 time.Time) (netbench.Sample, []*control.Status) {
	sts := make([]*control.Status, len(ds))
	began := time.Now()
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			c, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if resp, err := control.Call(c, d.sock, control.Request{Cmd: control.CmdStatus}); err == nil {
				sts[i] = resp.Status
			}
		})
	}
	wg.Wait()
	s := netbench.Sample{At: began.Sub(t0), Poll: time.Since(began), Master: oneMaster(sts), Rounds: -1}
	if !slices.Contains(sts, nil) {
		for _, st := range sts {
			s.Offsets = append(s.Offsets, st.OffsetSecs)
			var p uint64
			for _, c := range st.Packets {
				p += c.Rx + c.Tx
			}
			s.Packets = append(s.Packets, p)
			s.Loops = append(s.Loops, st.Packets["LOOP"].Rx+st.Packets["LOOP"].Tx)
		}
	}
	for _, d := range ds {
		c, err := flood.CPUSeconds(d.cmd.Process.Pid)
		if err != nil {
			s.CPU = nil
			break
		}
		s.CPU = append(s.CPU, c)
	}
	if s.Master >= 0 {
		if v, err := rounds(ctx, ds[s.Master]); err == nil {
			s.Rounds = v
		}
	}
	return s, sts
}

// oneMaster is the index of the one daemon that is master when every
// other one answered and follows it; -1 otherwise.
func oneMaster(sts []*control.Status) int {
	m := -1
	for i, s := range sts {
		switch {
		case s == nil:
			return -1
		case s.State == "master" && m >= 0:
			return -1
		case s.State == "master":
			m = i
		}
	}
	if m < 0 {
		return -1
	}
	for i, s := range sts {
		if i != m && (s.State != "slave" || s.Master == nil || s.Master.Name != sts[m].Hostname) {
			return -1
		}
	}
	return m
}

// rounds is d's sync rounds so far, from its metrics, fetched from
// inside its namespace.
func rounds(ctx context.Context, d *daemon) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) { return netbench.DialIn(ctx, d.ns, addr) }}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metrics+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, err
	}
	v, ok := netbench.CounterSum(b, "timed_sync_rounds_total")
	if !ok {
		return 0, fmt.Errorf("%s: no timed_sync_rounds_total in its metrics", d.name)
	}
	return v, nil
}

// tail is the end of a log, for an error.
func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 600 {
		b = b[len(b)-600:]
	}
	if len(b) == 0 {
		return "(empty log)"
	}
	return strings.TrimSpace(string(b))
}
