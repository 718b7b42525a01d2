// Command bench-flood measures what the flood of issue 11 costs a master
// now, beside what it cost before the hardening. For each flood it starts
// three daemons (bin/timed, peers mode on 127.0.0.1, simulated clocks),
// waits for a master, and floods it from one outside source (127.0.0.2)
// at 10,000 datagrams a second for 30 s: random bytes; well-formed
// ACCEPT, QUIT, ELECTION and CONFLICT under made-up names; and that again
// with the daemons logging at debug level. It samples `timedc status`
// every 100 ms and every daemon's state every second, and prints one
// table: the master's RSS and CPU, status latency, masters seen, log
// bytes, and drops by reason.
//
//	make build && go run ./cmd/bench-flood -bin bin
//
// Everything it starts and writes (daemons, sockets, logs) is gone when
// it returns, interrupted or not. Traffic stays on loopback.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/timed-project/timed/bench/flood"
	"github.com/timed-project/timed/timed/control"
	"github.com/timed-project/timed/tsp"
)

func main() {
	bin := flag.String("bin", "bin", "directory holding timed and timedc (make build)")
	duration := flag.Duration("duration", 30*time.Second, "how long each flood lasts")
	rate := flag.Int("rate", 10000, "datagrams a second")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *bin, *duration, *rate); err != nil {
		fmt.Fprintln(os.Stderr, "bench-flood:", err)
		os.Exit(1)
	}
}

// phase is one flood.
type phase struct {
	name  string
	level string // the daemons' --log-level
	mix   func() *flood.Mix
}

var phases = []phase{
	{"random bytes", "info", func() *flood.Mix { return flood.NewMix(1, 100) }},
	{"ACCEPT QUIT ELECTION CONFLICT", "info", func() *flood.Mix {
		return flood.NewMix(1, 0, tsp.Accept, tsp.Quit, tsp.Election, tsp.Conflict)
	}},
	{"the same, debug log", "debug", func() *flood.Mix {
		return flood.NewMix(1, 0, tsp.Accept, tsp.Quit, tsp.Election, tsp.Conflict)
	}},
}

func run(ctx context.Context, bin string, d time.Duration, rate int) error {
	for _, b := range []string{"timed", "timedc"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return fmt.Errorf("%w (run `make build` first, or give -bin)", err)
		}
	}
	fmt.Printf("flood: %d datagrams/s for %v from one source (127.0.0.2) at the master of 3 daemons; %s\n",
		rate, d, "timedc status every 100 ms, every state every 1 s")
	var results []*result
	for _, ph := range phases {
		fmt.Printf("  %s (log level %s) …\n", ph.name, ph.level)
		r, err := runPhase(ctx, bin, ph, d, rate)
		if err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
		results = append(results, r)
	}
	printTable(results)
	return nil
}

// result is what one flood cost the master.
type result struct {
	phase                phase
	sent                 flood.Result
	rssBefore, rssPeak   uint64
	cpu                  float64 // seconds, during the flood
	status               []time.Duration
	statusFailed         int
	masters              map[int]int // masters seen in a 1 s sample → samples
	samples              int
	logBytes, infoBytes  int64 // during the flood; infoBytes: its lines above debug
	drops                map[string]uint64
	kernelDrops          uint64
	masterName, logLevel string
}

func runPhase(ctx context.Context, bin string, ph phase, d time.Duration, rate int) (_ *result, err error) {
	dir, err := os.MkdirTemp("", "bench-flood")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c, err := startCluster(bin, dir, ph.level)
	defer c.stop()
	if err != nil {
		return nil, err
	}
	m, err := c.awaitMaster(ctx, 30*time.Second)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if err != nil {
		return nil, err
	}
	defer conn.Close()

	r := &result{phase: ph, masters: map[int]int{}, masterName: m.name, logLevel: ph.level}
	pid := m.cmd.Process.Pid
	mem, err := flood.ReadMem(pid)
	if err != nil {
		return nil, err
	}
	r.rssBefore = mem.RSS
	cpu0, err := flood.CPUSeconds(pid)
	if err != nil {
		return nil, err
	}
	drops0, err := m.drops(ctx)
	if err != nil {
		return nil, err
	}
	log0 := fileSize(m.log)
	kdrops0, _ := flood.SocketDrops(m.port)

	fctx, cancel := context.WithTimeout(ctx, d+5*time.Second)
	defer cancel()
	done := make(chan flood.Result, 1)
	mix := ph.mix()
	go func() {
		res, _ := flood.Send(fctx, []*net.UDPConn{conn}, netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(m.port)), rate, d, mix.Next)
		done <- res
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for i := 1; ; i++ {
		select {
		case r.sent = <-done:
		case <-tick.C:
			start := time.Now()
			if err := exec.CommandContext(ctx, filepath.Join(bin, "timedc"), "--control-socket", m.sock, "--timeout", "2s", "status").Run(); err != nil {
				r.statusFailed++
			}
			r.status = append(r.status, time.Since(start))
			if i%10 == 0 {
				r.masters[c.masters(ctx)]++
				r.samples++
			}
			continue
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		break
	}
	cpu1, err := flood.CPUSeconds(pid)
	if err != nil {
		return nil, err
	}
	r.cpu = cpu1 - cpu0
	if mem, err = flood.ReadMem(pid); err != nil {
		return nil, err
	}
	r.rssPeak = mem.Peak
	r.logBytes = fileSize(m.log) - log0
	r.infoBytes = aboveDebug(m.log, log0)
	kdrops1, _ := flood.SocketDrops(m.port)
	r.kernelDrops = kdrops1 - kdrops0
	drops1, err := m.drops(ctx)
	if err != nil {
		return nil, err
	}
	r.drops = map[string]uint64{}
	for k, n := range drops1 {
		if n > drops0[k] {
			r.drops[k] = n - drops0[k]
		}
	}
	return r, nil
}

// daemon is one timed process and its files.
type daemon struct {
	name, sock, log string
	port            int
	cmd             *exec.Cmd
	done            chan struct{}
}

type cluster []*daemon

// startCluster starts three daemons in peers mode on free loopback
// ports, each on a simulated clock with neither offset nor drift, all
// eligible as master, with the fast profile and a 1 s round (as the
// integration tests).
func startCluster(bin, dir, level string) (cluster, error) {
	var c cluster
	var peers []string
	for i := range 3 {
		// A port the kernel finds free, released just before the daemon
		// binds it.
		l, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return c, err
		}
		port := l.LocalAddr().(*net.UDPAddr).Port
		l.Close()
		name := fmt.Sprintf("n%d", i+1)
		c = append(c, &daemon{name: name, port: port, sock: filepath.Join(dir, name+".sock"), log: filepath.Join(dir, name+".log")})
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(port))
	}
	return c, c.start(bin, strings.Join(peers, ","), level)
}

func (c cluster) start(bin, peers, level string) error {
	for _, d := range c {
		f, err := os.Create(d.log)
		if err != nil {
			return err
		}
		d.cmd = exec.Command(filepath.Join(bin, "timed"), "-M", "--profile", "fast", "--port", strconv.Itoa(d.port),
			"--hostname", d.name, "--peers", peers, "--clock", "sim:offset=0us,drift=0ppm", "--control-socket", d.sock,
			"--log-level", level, "--sync-interval", "1s", "--election-timeout-min", "2s", "--election-timeout-max", "4s")
		d.cmd.Stdout, d.cmd.Stderr = f, f
		err = d.cmd.Start()
		f.Close()
		if err != nil {
			return err
		}
		d.done = make(chan struct{})
		go func(d *daemon) {
			_ = d.cmd.Wait()
			close(d.done)
		}(d)
	}
	return nil
}

// stop ends every daemon: SIGTERM, and SIGKILL after 3 s.
func (c cluster) stop() {
	for _, d := range c {
		if d.done != nil {
			_ = d.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, d := range c {
		if d.done == nil {
			continue
		}
		select {
		case <-d.done:
		case <-time.After(3 * time.Second):
			_ = d.cmd.Process.Kill()
			<-d.done
		}
	}
}

func (d *daemon) status(ctx context.Context) (*control.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := control.Call(ctx, d.sock, control.Request{Cmd: control.CmdStatus})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, errors.New(d.name + " answered without a status")
	}
	return resp.Status, nil
}

func (d *daemon) drops(ctx context.Context) (map[string]uint64, error) {
	st, err := d.status(ctx)
	if err != nil {
		return nil, err
	}
	return st.Drops, nil
}

// masters counts the daemons acting as master (master, or conflict while
// it looks for the master a CONFLICT named); a daemon that does not
// answer counts as none.
func (c cluster) masters(ctx context.Context) int {
	n := 0
	for _, d := range c {
		if st, err := d.status(ctx); err == nil && (st.State == "master" || st.State == "conflict") {
			n++
		}
	}
	return n
}

// awaitMaster polls until exactly one daemon is master and the others
// follow it: the election has its own timers and no event to wait on.
func (c cluster) awaitMaster(ctx context.Context, bound time.Duration) (*daemon, error) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		var master *daemon
		following := 0
		for _, d := range c {
			st, err := d.status(ctx)
			switch {
			case err != nil:
			case st.State == "master":
				master = d
			case st.State == "slave" && st.Master != nil:
				following++
			}
		}
		if master != nil && following == len(c)-1 {
			return master, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil, fmt.Errorf("no master within %v", bound)
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// aboveDebug is how many bytes of path past offset are lines at info
// level or above: what the daemon would have logged at info.
func aboveDebug(path string, offset int64) int64 {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return 0
	}
	var n int64
	for line := range strings.Lines(string(b[offset:])) {
		if !strings.Contains(line, "level=debug") && !strings.Contains(line, "level=trace") {
			n += int64(len(line))
		}
	}
	return n
}

// printTable prints the figures beside the issue's, before the hardening.
func printTable(rs []*result) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	row := func(label, anchor string, f func(*result) string) {
		cells := []string{label, anchor}
		for _, r := range rs {
			cells = append(cells, f(r))
		}
		fmt.Fprintln(w, strings.Join(cells, "\t")+"\t")
	}
	fmt.Println()
	row("master, per flood", "before hardening", func(r *result) string { return r.phase.name })
	row("---", "---", func(*result) string { return "---" })
	row("datagrams sent", "10,000/s", func(r *result) string {
		return fmt.Sprintf("%d (%.0f/s)", r.sent.Sent, r.sent.Rate())
	})
	row("RSS before → peak", "14 MB → 1.14 GB", func(r *result) string {
		return fmt.Sprintf("%.1f → %.1f MB", mb(r.rssBefore), mb(r.rssPeak))
	})
	row("CPU of the master", "both cores", func(r *result) string {
		return fmt.Sprintf("%.2f s (%.0f%% of a core)", r.cpu, 100*r.cpu/r.sent.Elapsed.Seconds())
	})
	row("timedc status p50 / p99", "timed out", func(r *result) string {
		s := fmt.Sprintf("%.1f / %.1f ms", ms(percentile(r.status, 50)), ms(percentile(r.status, 99)))
		if r.statusFailed > 0 {
			s += fmt.Sprintf(", %d of %d failed", r.statusFailed, len(r.status))
		}
		return s
	})
	row("masters seen, per 1 s sample", "two for 4 s", func(r *result) string {
		var parts []string
		for _, n := range slices.Sorted(maps.Keys(r.masters)) {
			parts = append(parts, fmt.Sprintf("%d in %d", n, r.masters[n]))
		}
		return strings.Join(parts, ", ") + fmt.Sprintf(" of %d", r.samples)
	})
	row("log written", "13 MB in 30 s (tracing on)", func(r *result) string {
		if r.logLevel == "info" {
			return fmt.Sprintf("%d bytes (info)", r.logBytes)
		}
		return fmt.Sprintf("%d bytes (%s; %d at info)", r.logBytes, r.logLevel, r.infoBytes)
	})
	row("kernel socket drops", "", func(r *result) string { return strconv.FormatUint(r.kernelDrops, 10) })
	var reasons []string
	for _, r := range rs {
		for k := range r.drops {
			if !slices.Contains(reasons, k) {
				reasons = append(reasons, k)
			}
		}
	}
	slices.Sort(reasons)
	for _, k := range reasons {
		row("drops: "+k, "", func(r *result) string { return strconv.FormatUint(r.drops[k], 10) })
	}
	w.Flush()
	fmt.Println("\nbefore hardening: issue 11's figures, from a 10 s ACCEPT flood (memory, CPU, status,")
	fmt.Println("masters) and a 30 s random-bytes flood at default level that turned tracing on (log).")
}

func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func mb(b uint64) float64        { return float64(b) / (1 << 20) }
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
