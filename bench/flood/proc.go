package flood

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Mem is a process's resident memory, from /proc/PID/status.
type Mem struct {
	RSS  uint64 // VmRSS: resident now, bytes
	Peak uint64 // VmHWM: the most it was ever resident, bytes
}

// ReadMem reads pid's resident memory now and at its peak.
func ReadMem(pid int) (Mem, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Mem{}, err
	}
	var m Mem
	var found int
	for line := range bytes.Lines(b) {
		var into *uint64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			into = &m.RSS
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			into = &m.Peak
		default:
			continue
		}
		// "VmRSS:	   14336 kB"
		f := bytes.Fields(line)
		if len(f) != 3 || string(f[2]) != "kB" {
			return Mem{}, fmt.Errorf("%w: pid %d: %q", ErrNoProc, pid, line)
		}
		kb, err := strconv.ParseUint(string(f[1]), 10, 64)
		if err != nil {
			return Mem{}, fmt.Errorf("%w: pid %d: %q", ErrNoProc, pid, line)
		}
		*into = kb << 10
		found++
	}
	if found != 2 {
		return Mem{}, fmt.Errorf("%w: pid %d: VmRSS or VmHWM missing", ErrNoProc, pid)
	}
	return m, nil
}

// userHZ is the unit of /proc/PID/stat's times, USER_HZ, which Linux
// fixes at 100 for user space whatever the kernel's own tick.
const userHZ = 100

// CPUSeconds is the CPU time pid has run for, user and system, over all
// its threads, from /proc/PID/stat.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// "pid (comm) state ppid …": comm may hold spaces and parentheses, so
	// the fields are counted from the last ')'. utime and stime are the
	// 14th and 15th fields, the 12th and 13th after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: pid %d: stat %q", ErrNoProc, pid, b)
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: pid %d: stat %q", ErrNoProc, pid, b)
	}
	var ticks uint64
	for _, s := range f[11:13] {
		n, err := strconv.ParseUint(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: pid %d: stat %q", ErrNoProc, pid, b)
		}
		ticks += n
	}
	return float64(ticks) / userHZ, nil
}

// SocketDrops is what the kernel dropped at the UDP socket bound to port
// (any address) for want of room in its receive buffer: datagrams the
// daemon never read, from /proc/net/udp.
func SocketDrops(port int) (uint64, error) {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return 0, err
	}
	suffix := fmt.Sprintf(":%04X", port)
	for line := range bytes.Lines(b) {
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when
		// retrnsmt uid timeout inode ref pointer drops
		f := bytes.Fields(line)
		if len(f) < 13 || !bytes.HasSuffix(f[1], []byte(suffix)) {
			continue
		}
		return strconv.ParseUint(string(f[len(f)-1]), 10, 64)
	}
	return 0, fmt.Errorf("%w: no UDP socket on port %d", ErrNoProc, port)
}
