//go:build vm

package vmsystemd

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/timed-project/timed/tests/internal/vmguest"
)

var (
	//go:embed guest/check.sh
	checkScript []byte
	//go:embed guest/init.sh
	initScript []byte
)

// checks are the guest's checks, in the order check.sh runs them. Each
// must come back, and pass; check.sh reports others only as failures
// (master: the host did not answer an ask).
var checks = []string{
	"install", "masked-not-started", "is-active", "security",
	"timedc-synchronised", "ntp-synchronized", "timedatectl-ntp-service",
	"set-ntp-false", "set-ntp-true", "timed-wait",
	"group-member", "group-outsider", "reload", "stop",
	"purge", "purge-keeps-user", "install-starts", "purge-after-start",
}

const (
	// The guest's and the master's addresses on the namespace's bridge.
	guestAddr  = "10.77.0.2/24"
	masterAddr = "10.77.0.1/24"

	// syncBound is how long the guest waits, from asking for the master,
	// for `timedc status` to say synchronised: the master's start (its
	// search for another master and no-master wait, about 1 s with the
	// fast profile), the guest slave's SLAVEUP and the first round
	// (first-sync 50 ms), with room for TCG on a loaded 2-core machine,
	// where one `timedc` in the guest takes up to a second.
	syncBound = 120 * time.Second
	// kernelBound is how long after that NTPSynchronized may lag: the
	// daemon clears STA_UNSYNC with the correction that makes it
	// synchronised; timedated answers within a poll.
	kernelBound = 60 * time.Second
	// vmBound bounds the whole guest: boot, install, the checks above
	// and the purge, on a machine where other suites run at once.
	vmBound = 12 * time.Minute
)

// ---- figures ----

type figure struct{ name, value string }

var figures []figure

// report records a measured figure for the table printed at the end; the
// figures are reported, not asserted.
func report(name, value string) { figures = append(figures, figure{name, value}) }

func TestMain(m *testing.M) {
	code := m.Run()
	if len(figures) > 0 {
		var b bytes.Buffer
		tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SCENARIO\tFIGURE\tVALUE")
		for _, f := range figures {
			fmt.Fprintf(tw, "TestSystemdBoot\t%s\t%s\n", f.name, f.value)
		}
		_ = tw.Flush()
		if path := os.Getenv("TIMED_E2E_SYSTEMD_FIGURES"); path != "" {
			_ = os.WriteFile(path, b.Bytes(), 0o644)
		} else {
			_, _ = os.Stdout.Write(b.Bytes())
		}
	}
	os.Exit(code)
}

// TestSystemdBoot boots the package's .deb under systemd in a QEMU guest
// and asserts each of check.sh's checks as a subtest.
func TestSystemdBoot(t *testing.T) {
	if reason := missing(); reason != "" {
		t.Skip(reason)
	}
	deb := os.Getenv("TIMED_DEB")
	if deb == "" {
		t.Fatal("TIMED_DEB is not set: make e2e-systemd builds the package and sets it")
	}
	bin := envOr("TIMED_E2E_SYSTEMD_BIN", "../../bin")
	exposure, exposureWait, err := statedExposure("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	assets := script(t, "../vm/assets.sh")
	rootfs := script(t, "rootfs.sh")["rootfs"]
	dir := t.TempDir()

	initrd := filepath.Join(dir, "initrd.cpio")
	if err := buildInitramfs(dir, initrd, assets, deb, exposure, exposureWait); err != nil {
		t.Fatal(err)
	}
	ns := netns(t)

	// The guest: its console (kernel and systemd) to a file, the checks'
	// lines on its second serial port to our pipe.
	console := filepath.Join(dir, "console.log")
	m := vmguest.Machine{Accel: "tcg", MemMiB: 1024, CPUs: 2, Kernel: assets["kernel"], Initrd: initrd,
		Append: "console=ttyS0 panic=-1 loglevel=4 rdinit=/init"}
	qemu := exec.Command("ip", slices.Concat([]string{"netns", "exec", ns, "qemu-system-x86_64"}, m.Args(), []string{
		"-no-reboot",
		"-drive", "file=" + rootfs + ",format=raw,if=virtio,snapshot=on",
	}, vmguest.TapNIC("tap0", "52:54:00:77:00:02"), []string{
		"-chardev", "file,id=con,path=" + console, "-serial", "chardev:con",
		"-chardev", "stdio,id=res,signal=off", "-serial", "chardev:res",
	})...)
	qemu.Env = append(os.Environ(), "TMPDIR="+dir) // the snapshot's overlay
	var qemuErr bytes.Buffer
	qemu.Stderr = &qemuErr
	out, err := qemu.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := qemu.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	start(t, qemu)
	booted := time.Now()
	lines := make(chan line)
	go read(out, lines)

	var (
		results   = map[string]result{}
		journal   []string
		masterLog bytes.Buffer
		masterAt  time.Time // the master's first start
		master    *exec.Cmd
		done      bool
		deadline  = time.After(vmBound)
	)
	defer func() {
		if t.Failed() {
			t.Logf("---- log of QEMU (stderr) ----\n%s", qemuErr.String())
			if b, err := os.ReadFile(console); err == nil {
				t.Logf("---- log of the guest's console (last 60 lines) ----\n%s", tail(string(b), 60))
			}
			stop(master) // its output is copied until it exits
			t.Logf("---- log of the master ----\n%s", masterLog.String())
			t.Logf("---- log of the guest (journalctl -b) ----\n%s", strings.Join(journal, "\n"))
		}
	}()
loop:
	for {
		select {
		case <-deadline:
			t.Errorf("the guest did not finish within %v", vmBound)
			break loop
		case l, ok := <-lines:
			if !ok {
				if !done {
					t.Errorf("the guest stopped before its checks were done")
				}
				break loop
			}
			kind, rest, _ := strings.Cut(l.text, " ")
			switch kind {
			case "begin":
				report("boot: QEMU start to the checks (host)", seconds(l.at.Sub(booted)))
			case "ask":
				switch rest {
				case "start-master":
					master = startMaster(t, ns, bin, dir, &masterLog)
					if masterAt.IsZero() {
						masterAt = time.Now()
					}
				case "stop-master":
					stop(master)
				default:
					t.Errorf("guest asked for %q", rest)
					continue
				}
				if _, err := fmt.Fprintf(in, "done %s\n", rest); err != nil {
					t.Errorf("answering the guest: %v", err)
				}
			case "check":
				name, rest, _ := strings.Cut(rest, " ")
				status, detail, _ := strings.Cut(rest, " ")
				results[name] = result{pass: status == "pass", detail: detail}
				if name == "ntp-synchronized" && status == "pass" && !masterAt.IsZero() {
					report("NTPSynchronized=yes after the master started (host)", seconds(l.at.Sub(masterAt)))
				}
			case "figure":
				name, value, _ := strings.Cut(rest, " ")
				report(name, value)
			case "journal":
				journal = append(journal, rest)
			case "fatal":
				t.Errorf("guest: %s", rest)
			case "done":
				done = true
				report("the whole guest run (host)", seconds(l.at.Sub(booted)))
			}
		}
	}
	// After its last line the guest powers off and QEMU exits; a guest
	// that did not get there is stopped now.
	exited := make(chan error, 1)
	go func() { exited <- qemu.Wait() }()
	if !done {
		_ = qemu.Process.Kill()
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Errorf("QEMU still running a minute after the guest's last line")
		_ = qemu.Process.Kill()
		<-exited
	}

	for name, r := range results {
		if !slices.Contains(checks, name) && !r.pass {
			t.Errorf("%s: %s", name, r.detail)
		}
	}
	for _, name := range checks {
		t.Run(name, func(t *testing.T) {
			r, ok := results[name]
			switch {
			case !ok:
				t.Errorf("no result from the guest")
			case !r.pass:
				t.Errorf("%s", r.detail)
			default:
				t.Logf("%s", r.detail)
			}
		})
	}
}

type result struct {
	pass   bool
	detail string
}

// line is one "TVM …" line of the guest's result port, with the host's
// time of its arrival.
type line struct {
	text string
	at   time.Time
}

// read sends the guest's result lines, the "TVM " prefix cut, until the
// port closes (QEMU exited); anything else on the port is not ours.
func read(r io.Reader, lines chan<- line) {
	defer close(lines)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if text, ok := strings.CutPrefix(strings.TrimRight(sc.Text(), "\r"), "TVM "); ok {
			lines <- line{text, time.Now()}
		}
	}
}

// missing says what the suite needs and this machine lacks, or "".
func missing() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespace, tap device)"
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return "no /dev/net/tun: " + err.Error()
	}
	for _, tool := range []string{"qemu-system-x86_64", "debootstrap", "mkfs.ext4", "cpio", "ip", "apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not found (make e2e-systemd installs it from Debian's packages)"
		}
	}
	return ""
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// statedExposure is the exposure levels the operating manual states for
// `systemd-analyze security --offline=true` of timed.service and
// timed-wait.service ("Installing in detail").
func statedExposure(path string) (timed, wait string, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", "", err
	}
	m := regexp.MustCompile(`rates timed\.service's sandbox (\d+\.\d) \(\w+\) and\s+timed-wait\.service's (\d+\.\d)`).FindSubmatch(b)
	if m == nil {
		return "", "", fmt.Errorf("%s states no systemd-analyze security figures for timed.service and timed-wait.service", path)
	}
	return string(m[1]), string(m[2]), nil
}

// script runs one of the suite's shell scripts and returns its KEY=VALUE
// lines; what it says on stderr goes to the test's log.
func script(t *testing.T, path string) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if s := strings.TrimSpace(stderr.String()); s != "" {
		t.Logf("%s: %s", path, s)
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return vmguest.ParseKV(out)
}

// netns makes the run's network namespace, named tvs and the run's id
// (TIMED_E2E_SYSTEMD_RUN, which make's trap also removes, else random): a bridge
// with the master's address and the guest's tap on it. Cleanup deletes
// it, and every link in it with it.
func netns(t *testing.T) string {
	t.Helper()
	id := os.Getenv("TIMED_E2E_SYSTEMD_RUN")
	if id == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		id = hex.EncodeToString(b)
	}
	ns := "tvs" + id
	if err := vmguest.AddNamespace(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := vmguest.DelNamespace(ns); err != nil {
			t.Error(err)
		}
	})
	if err := vmguest.AddBridge(ns, "br0", masterAddr); err != nil {
		t.Fatal(err)
	}
	if err := vmguest.AddTap(ns, "tap0", "br0"); err != nil {
		t.Fatal(err)
	}
	return ns
}

// startMaster starts bin/timed in the namespace as the guest's master:
// --clock dry-run, so that it reads the host's clock and never sets it.
func startMaster(t *testing.T, ns, bin, dir string, log io.Writer) *exec.Cmd {
	t.Helper()
	master := exec.Command("ip", "netns", "exec", ns, filepath.Join(bin, "timed"),
		"--config", "/dev/null", "--clock", "dry-run", "--master", "--profile", "fast",
		"--hostname", "tvs-master", "--control-socket", filepath.Join(dir, "master.sock"))
	master.Env = vmguest.WithoutTimedEnv(os.Environ()) // the test's TIMED_* are not its configuration
	master.Stdout, master.Stderr = log, log
	start(t, master)
	return master
}

// stop kills cmd, if started, and waits for it.
func stop(cmd *exec.Cmd) {
	if cmd != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// start starts cmd so that it dies with the test's process (a timeout's
// panic skips the cleanups) and is killed at the test's end.
func start(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", strings.Join(cmd.Args, " "), err)
	}
	t.Cleanup(func() { stop(cmd) })
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }

func tail(s string, n int) string {
	ls := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return strings.Join(ls, "\n")
}
