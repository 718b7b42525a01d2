package netbench

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The kernel's neighbour tables (ARP, IPv6 ND) are shared by every
// network namespace, and so are their limits: gc_thresh3 (1024 by
// default) bounds the entries of all namespaces together. A LAN host
// holds one entry per peer it talks to; N namespaces on one host hold
// up to N·(N−1) together (a master's unicasts to every slave, every
// slave's ACCEPTs to each candidate of an election). Past the limit the
// kernel logs "neighbor table overflow!" and drops the unicast datagrams
// it cannot resolve: at N = 150 SLAVEUPs, SETTIMEs and ACKs vanished, and
// slaves stayed off their master's list (issue 20). A LAN of 150 real
// hosts has no such limit, so the benchmark lifts it for its run.

// neighDirs are the tables raised, IPv4's and IPv6's defaults.
var neighDirs = []string{"/proc/sys/net/ipv4/neigh/default", "/proc/sys/net/ipv6/neigh/default"}

// NeighEntries is the neighbour-table room the benchmark wants for n
// daemons: every pair both ways, and the host's own 1024.
func NeighEntries(n int) int { return n*(n-1) + 1024 }

// neighSaved is one gc_thresh file's value before raiseNeigh.
type neighSaved struct {
	path string
	was  int
}

// raiseNeigh raises gc_thresh1..3 of both tables so that gc_thresh3 is at
// least want (gc_thresh2 want/2, gc_thresh1 want/4: the kernel's ratios),
// never lowering one, and returns what it changed, for restoreNeigh.
func raiseNeigh(want int) ([]neighSaved, error) {
	var saved []neighSaved
	var errs []error
	for _, dir := range neighDirs {
		for i, div := range []int{4, 2, 1} {
			p := fmt.Sprintf("%s/gc_thresh%d", dir, i+1)
			b, err := os.ReadFile(p)
			if errors.Is(err, os.ErrNotExist) {
				continue // no IPv6
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			was, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				continue
			}
			if was >= want/div {
				continue
			}
			if err := os.WriteFile(p, []byte(strconv.Itoa(want/div)), 0o644); err != nil {
				errs = append(errs, err)
				continue
			}
			saved = append(saved, neighSaved{path: p, was: was})
		}
	}
	return saved, errors.Join(errs...)
}

// restoreNeigh puts back what raiseNeigh changed.
func restoreNeigh(saved []neighSaved) error {
	var errs []error
	for _, s := range saved {
		if err := os.WriteFile(s.path, []byte(strconv.Itoa(s.was)), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
