//go:build vm

package vm

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/timed-project/timed/tests/internal/vmguest"
)

// ---- the network ----

// network is the run's namespace: a bridge whose address is the
// observer's, and one tap device per guest on it. Names carry the prefix
// tvm and the run's id, so that runs at once, and what a killed run left,
// never collide (make e2e-vm deletes the namespace of its run at exit,
// whatever happened).
type network struct {
	t      *testing.T
	ns     string
	bridge string
	dir    string
	guests []*guest
}

// nsName is the run's namespace; make e2e-vm deletes it by this name.
func nsName() string { return "tvm-" + run }

func newNetwork(t *testing.T) *network {
	t.Helper()
	n := &network{t: t, ns: nsName(), bridge: "tvm" + run + "b", dir: t.TempDir()}
	if err := vmguest.AddNamespace(n.ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.close)
	if err := vmguest.AddBridge(n.ns, n.bridge, observerAddr+"/24"); err != nil {
		t.Fatal(err)
	}
	return n
}

// ip runs ip(8) in the namespace.
func (n *network) ip(args ...string) {
	n.t.Helper()
	if err := vmguest.IP(n.ns, args...); err != nil {
		n.t.Fatal(err)
	}
}

// close stops every guest, dumps their consoles when the test failed,
// and deletes the namespace (and with it the bridge and the taps).
func (n *network) close() {
	for _, g := range n.guests {
		g.kill()
		if n.t.Failed() {
			n.t.Logf("---- log of %s's console (last 60 lines) ----\n%s", g.name, tail(g.console(), 60))
			n.t.Logf("---- log of timed on %s (last 150 lines) ----\n%s", g.name, tail(g.timedLog(), 150))
			n.t.Logf("---- log of %s's command channel (last 40 lines) ----\n%s", g.name, g.ch.tail(40))
		}
	}
	if dir := os.Getenv("TIMED_E2E_VM_LOGS"); dir != "" {
		n.keepLogs(dir)
	}
	if err := vmguest.DelNamespace(n.ns); err != nil {
		n.t.Errorf("delete namespace %s: %v", n.ns, err)
	}
	if _, err := os.Stat("/run/netns/" + n.ns); err == nil {
		n.t.Errorf("namespace %s is still there", n.ns)
	}
}

// keepLogs copies every guest's console and daemon log into dir
// (TIMED_E2E_VM_LOGS), as g1.console.log and g1.timed.log.
func (n *network) keepLogs(dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		n.t.Errorf("keep logs: %v", err)
		return
	}
	for _, g := range n.guests {
		for _, f := range []string{g.console(), g.timedLog()} {
			if err := copyFile(f, filepath.Join(dir, g.name+"."+filepath.Base(f)), 0o644); err != nil {
				n.t.Errorf("keep logs: %v", err)
			}
		}
	}
}

// ---- guests ----

// guestSpec is what a guest is set off by at boot, and its daemon's role.
type guestSpec struct {
	step    int     // seconds, date -s
	freqPPM float64 // adjtimex -f
	// slaveOnly: the daemon may not be master (no -M, no -F), as a
	// client of the network's time servers.
	slaveOnly bool
}

// guest is one QEMU process: Debian's kernel, the suite's initramfs, a
// virtio NIC on the bridge, a 9p share for /var/lib/timed (state/ in
// its folder), the console (ttyS0) in console.log, and two virtio ports:
// the command channel on a unix socket, and the daemon's output in
// timed.log. The files stay across a reboot of the guest.
type guest struct {
	t     *testing.T
	i     int
	name  string
	addr  string
	tap   string
	spec  guestSpec
	dir   string
	accel string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	ch     *channel
}

// bootBound is how long a guest may take from QEMU's start to the
// shell: about 5 s under TCG on an idle core; several guests boot at
// once on a loaded 2-core machine.
const bootBound = 120 * time.Second

// kvmBootBound: KVM boots in a second where it works; where it stalls
// (nested, on this project's machines) the guest falls back to TCG.
const kvmBootBound = 20 * time.Second

// addGuest makes guest i's tap on the bridge and its folder; boot starts
// it.
func (n *network) addGuest(i int, spec guestSpec) *guest {
	n.t.Helper()
	g := &guest{t: n.t, i: i, name: guestName(i), addr: guestAddr(i), tap: fmt.Sprintf("tvm%st%d", run, i),
		spec: spec, dir: filepath.Join(n.dir, guestName(i)), accel: accel}
	if err := os.MkdirAll(filepath.Join(g.dir, "state"), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := vmguest.AddTap(n.ns, g.tap, n.bridge); err != nil {
		n.t.Fatal(err)
	}
	n.guests = append(n.guests, g)
	return g
}

func (g *guest) console() string  { return filepath.Join(g.dir, "console.log") }
func (g *guest) socket() string   { return filepath.Join(g.dir, "cmd.sock") }
func (g *guest) timedLog() string { return filepath.Join(g.dir, "timed.log") }

// qemuArgs: q35-less defaults (pc), no default devices, one CPU. The
// guest's clocksource is the HPET, which QEMU counts from the host's
// monotonic clock: every guest runs at the host's rate, and the only
// frequency error is the one injected (the TSC, which QEMU's TCG passes
// from the host, would add its calibration error, different at each
// boot).
func (g *guest) qemuArgs(accel string) []string {
	appendLine := strings.Join([]string{
		"console=ttyS0", "clocksource=hpet", "panic=-1", "loglevel=4",
		"timed.name=" + g.name, "timed.addr=" + g.addr + "/24",
		fmt.Sprintf("timed.step=%+d", g.spec.step),
		fmt.Sprintf("timed.freq=%d", int64(g.spec.freqPPM*65536)),
	}, " ")
	m := vmguest.Machine{Accel: accel, MemMiB: 256, CPUs: 1, Kernel: assets["kernel"], Initrd: initrd, Append: appendLine}
	return slices.Concat([]string{"netns", "exec", nsName(), "qemu-system-x86_64"}, m.Args(), []string{
		"-rtc", "base=utc",
		"-serial", "file:" + g.console(),
		"-device", "virtio-serial-pci,id=vs",
		"-chardev", "socket,id=cmd,path=" + g.socket() + ",server=on,wait=off",
		"-device", "virtserialport,bus=vs.0,chardev=cmd,name=cmd",
		"-chardev", "file,id=log,path=" + g.timedLog(),
		"-device", "virtserialport,bus=vs.0,chardev=log,name=log",
	}, vmguest.TapNIC(g.tap, fmt.Sprintf("52:54:00:77:00:%02x", g.i+1)), []string{
		"-fsdev", "local,id=st,path=" + filepath.Join(g.dir, "state") + ",security_model=none",
		"-device", "virtio-9p-pci,fsdev=st,mount_tag=state",
	})
}

// boot starts QEMU and waits for the guest's shell. With kvm, a guest
// that does not reach its shell within kvmBootBound is killed and booted
// again under TCG.
func (g *guest) boot() error {
	if g.accel == "kvm" {
		err := g.start("kvm", kvmBootBound)
		if err == nil {
			return nil
		}
		g.t.Logf("%s: kvm: %v; booting under tcg", g.name, err)
		g.kill()
		g.accel = "tcg"
	}
	return g.start(g.accel, bootBound)
}

func (g *guest) start(accel string, bound time.Duration) error {
	os.Remove(g.socket())
	cmd := exec.Command("ip", g.qemuArgs(accel)...)
	cmd.Env = vmguest.WithoutTimedEnv(os.Environ())
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	// QEMU dies with the test binary, even on a panic or a timeout that
	// skips every cleanup (ip netns exec execs QEMU in the same process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: start qemu: %w", g.name, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	g.mu.Lock()
	g.cmd, g.exited = cmd, exited
	g.mu.Unlock()

	deadline := time.Now().Add(bound)
	var conn net.Conn
	for {
		var err error
		if conn, err = net.Dial("unix", g.socket()); err == nil {
			break
		}
		select {
		case <-exited:
			return fmt.Errorf("%s: qemu exited: %s", g.name, strings.TrimSpace(stderr.String()))
		case <-time.After(20 * time.Millisecond): // the socket appears at QEMU's start, before the guest runs
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: no command socket after %v: %w", g.name, bound, err)
		}
	}
	g.ch = newChannel(conn)
	return g.awaitReady(0, time.Until(deadline))
}

// awaitReady waits for the shell's @@READY after offset from of the
// channel's output.
func (g *guest) awaitReady(from int, bound time.Duration) error {
	if _, err := g.ch.await(from, readyRE, bound, g.exited); err != nil {
		return fmt.Errorf("%s: no shell within %v (%w); console:\n%s", g.name, bound, err, tail(g.console(), 30))
	}
	return nil
}

var readyRE = regexp.MustCompile(`(?m)^@@READY$`)

// kill stops QEMU at once (the guest's power cord) and waits for it.
func (g *guest) kill() {
	g.mu.Lock()
	cmd, exited := g.cmd, g.exited
	g.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
	if g.ch != nil {
		g.ch.close()
	}
}

// run runs a shell command in the guest and returns its output (stdout
// and stderr); a non-zero exit is an error carrying the output.
func (g *guest) run(timeout time.Duration, script string) (string, error) {
	out, err := g.ch.run(script, timeout, g.exited)
	if err != nil {
		return out, fmt.Errorf("on %s: %s: %w", g.name, script, err)
	}
	return out, nil
}

// must is run, failing the test on an error.
func (g *guest) must(script string) string {
	g.t.Helper()
	out, err := g.run(30*time.Second, script)
	if err != nil {
		g.t.Fatal(err)
	}
	return out
}

// ---- the command channel ----

// channel is a guest's virtio port "cmd": the test writes a command
// line between markers, the guest's shell runs it, and the output between
// the markers is the command's. Everything read is kept (a few hundred
// kB over a run) for the failure dump.
type channel struct {
	conn net.Conn
	cmd  sync.Mutex // one command at a time

	mu     sync.Mutex
	buf    []byte
	more   chan struct{} // closed and replaced when bytes arrive
	err    error         // the read error that ended the reader
	seq    int
	closed bool
}

func newChannel(conn net.Conn) *channel {
	c := &channel{conn: conn, more: make(chan struct{})}
	go c.read()
	return c
}

func (c *channel) read() {
	b := make([]byte, 4096)
	for {
		n, err := c.conn.Read(b)
		c.mu.Lock()
		c.buf = append(c.buf, b[:n]...)
		if err != nil {
			c.err = err
		}
		close(c.more)
		c.more = make(chan struct{})
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (c *channel) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.conn.Close()
}

// offset is how much output has been read so far.
func (c *channel) offset() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.buf)
}

// await waits until re matches the output after from, and returns the
// match's submatch indexes (absolute).
func (c *channel) await(from int, re *regexp.Regexp, bound time.Duration, exited <-chan struct{}) ([]int, error) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		c.mu.Lock()
		loc := re.FindSubmatchIndex(c.buf[from:])
		more, rerr := c.more, c.err
		c.mu.Unlock()
		if loc != nil {
			for i := range loc {
				if loc[i] >= 0 {
					loc[i] += from
				}
			}
			return loc, nil
		}
		if rerr != nil {
			return nil, fmt.Errorf("channel closed: %w", rerr)
		}
		select {
		case <-more:
		case <-exited:
			return nil, errors.New("the guest is off")
		case <-timer.C:
			return nil, fmt.Errorf("no answer within %v", bound)
		}
	}
}

// run sends script and waits for its end marker. The markers are
// printed by printf from pieces, so that they never appear in the
// command line itself; script runs in a shell of its own (sh -c), so
// that even a syntax error in it leaves the channel's shell running.
func (c *channel) run(script string, timeout time.Duration, exited <-chan struct{}) (string, error) {
	c.cmd.Lock()
	defer c.cmd.Unlock()
	c.mu.Lock()
	c.seq++
	seq := c.seq
	from := len(c.buf)
	c.mu.Unlock()
	line := fmt.Sprintf("printf '@@B%%s\\n' %d; sh -c %s </dev/null 2>&1; printf '@@E%%s %%d\\n' %d $?\n", seq, shellQuote(script), seq)
	if _, err := c.conn.Write([]byte(line)); err != nil {
		return "", fmt.Errorf("write to the channel: %w", err)
	}
	re := regexp.MustCompile(fmt.Sprintf(`(?s)@@B%d\n(.*?)@@E%d (\d+)\n`, seq, seq))
	loc, err := c.await(from, re, timeout, exited)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	out := string(c.buf[loc[2]:loc[3]])
	rc, _ := strconv.Atoi(string(c.buf[loc[4]:loc[5]]))
	c.mu.Unlock()
	if rc != 0 {
		return out, fmt.Errorf("exit status %d: %s", rc, strings.TrimSpace(out))
	}
	return out, nil
}

// send writes a command line and does not wait (for poweroff and reboot,
// whose end the test awaits otherwise).
func (c *channel) send(script string) error {
	c.cmd.Lock()
	defer c.cmd.Unlock()
	_, err := c.conn.Write([]byte("sh -c " + shellQuote(script) + " </dev/null >/dev/null 2>&1\n"))
	return err
}

// tail is the channel's last n lines.
func (c *channel) tail(n int) string {
	if c == nil {
		return "(no channel)"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lines := strings.Split(string(c.buf), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// shellQuote quotes s for sh: in single quotes, each quote in s closed,
// escaped with a backslash and opened again.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
