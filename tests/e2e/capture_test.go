//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// capture is tcpdump writing the TSP packets (udp port 525) crossing the
// cluster's bridge to a pcap file.
type capture struct {
	c    *cluster
	file string
	cmd  *exec.Cmd
	done chan error
	errb *bytes.Buffer
}

// startCapture starts tcpdump on the cluster's bridge and returns once it
// listens (tcpdump says so on stderr). Cleanup stops it.
func (c *cluster) startCapture() *capture {
	c.t.Helper()
	if _, err := exec.LookPath("tcpdump"); err != nil {
		c.t.Fatalf("tcpdump: %v (make e2e installs it)", err)
	}
	cp := &capture{c: c, file: filepath.Join(c.t.TempDir(), "tsp.pcap"), done: make(chan error, 1), errb: &bytes.Buffer{}}
	// -U and --immediate-mode: each packet to the file as it arrives (else
	// the last second of packets waits in libpcap's ring and is lost at
	// SIGINT); -B: a 64 MiB kernel buffer, so that a burst of probes while
	// the machine is busy is not dropped; -s 0: whole packets (a TSP packet
	// is 268 bytes, the decoder needs the name at its end).
	cp.cmd = exec.Command("tcpdump", "-i", c.bridge(), "-n", "-U", "--immediate-mode", "-B", "65536", "-s", "0", "-w", cp.file, "udp", "port", "525")
	// Should the test binary die (a -timeout panic runs no Cleanup),
	// tcpdump dies with it.
	cp.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stderr, err := cp.cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cp.cmd.Start(); err != nil {
		c.t.Fatalf("start tcpdump: %v", err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			cp.errb.WriteString(sc.Text() + "\n")
			if !once && strings.Contains(sc.Text(), "listening on") {
				once = true
				close(listening)
			}
		}
		cp.done <- cp.cmd.Wait()
	}()
	c.t.Cleanup(cp.stop)
	select {
	case <-listening:
	case err := <-cp.done:
		c.t.Fatalf("tcpdump exited: %v: %s", err, cp.errb.String())
	case <-time.After(30 * time.Second):
		c.t.Fatalf("tcpdump not listening after 30 s: %s", cp.errb.String())
	}
	return cp
}

// stop ends the capture (SIGINT flushes the file); safe to call twice.
func (cp *capture) stop() {
	if cp.cmd.ProcessState != nil || cp.cmd.Process == nil {
		return
	}
	_ = cp.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-cp.done:
		cp.c.t.Logf("tcpdump: %s", strings.TrimSpace(cp.errb.String()))
	case <-time.After(10 * time.Second):
		_ = cp.cmd.Process.Kill()
		<-cp.done
	}
}

// tcpdump 4.99's TSP decoder (print-timed.c) prints "TSP_<TYPE> vers <v>
// seq <n> ... name <host>" for types it knows and "(tsp_type 0x..)" for
// the others.
var tspLine = regexp.MustCompile(`(?:\bTSP_([A-Z]+)|\(tsp_type (0x[0-9a-f]+)\)) vers (\d+)`)

// decode reads the capture back through tcpdump's TSP decoder and counts
// the packets by the type and version it decoded.
func (cp *capture) decode() (map[string]uint64, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "tcpdump", "-r", cp.file, "-n", "-v").Output()
	if err != nil {
		return nil, "", fmt.Errorf("tcpdump -r %s: %w", cp.file, err)
	}
	counts := map[string]uint64{}
	for _, m := range tspLine.FindAllStringSubmatch(string(out), -1) {
		name := m[1]
		if name == "" {
			name = "tsp_type " + m[2]
		}
		counts[name+" v"+m[3]]++
	}
	return counts, string(out), nil
}
