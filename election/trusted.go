package election

import (
	"net/netip"
	"slices"
	"time"
)

// Trust is bound to addresses, never to the name a packet carries: anyone
// on the LAN can write any name. BSD's good_host_name compared names, so a
// forged name from any address passed its -F check.

// SetTrusted replaces the trusted-host list (BSD -F, resolved to addresses
// by the runtime), as a SIGHUP reload does. An address with port 0 matches
// any port. A nil list trusts everyone; an empty non-nil one trusts
// nobody (a -F list none of whose names resolved yet must not open the
// door to all). It takes effect with the next packet: a master that is no
// longer trusted is suppressed when it next speaks.
func (m *Machine) SetTrusted(addrs []netip.AddrPort) {
	m.cfg.Trusted = slices.Clone(addrs)
	m.trusted = nil
	if addrs == nil {
		return
	}
	m.trusted = make([]netip.AddrPort, 0, len(addrs))
	for _, a := range addrs {
		m.trusted = append(m.trusted, netip.AddrPortFrom(a.Addr().Unmap(), a.Port()))
	}
}

func (m *Machine) isTrusted(from netip.AddrPort) bool {
	if m.trusted == nil {
		return true
	}
	ip := from.Addr().Unmap()
	for _, t := range m.trusted {
		if t.Addr() == ip && (t.Port() == 0 || t.Port() == from.Port()) {
			return true
		}
	}
	return false
}

// Trusted is BSD's good_host_name, bound to the source address: true with
// no -F list and for the listed addresses. The daemon asks it for the
// network time and the date path, so both follow the list the machine
// enforces, reloads included.
func (m *Machine) Trusted(from netip.AddrPort) bool { return m.isTrusted(from) }

// maxKnownMasters bounds the table of addresses seen acting as masters:
// forged MASTERUPs from random addresses must not grow it without end.
const maxKnownMasters = 32

// sawMaster records that from acted as a master (MASTERUP, MASTERACK to
// our own question, LOOP, RESOLVE, or the corrections of the master we
// follow). Only such an address may make this daemon QUIT: a QUIT from
// anywhere else is a forgery or a slave's mistake, and obeying it would let
// one packet per round keep a network without a master.
func (m *Machine) sawMaster(from netip.AddrPort) {
	if m.knownMasters == nil {
		m.knownMasters = map[netip.AddrPort]time.Time{}
	}
	if _, ok := m.knownMasters[from]; !ok && len(m.knownMasters) >= maxKnownMasters {
		var oldest netip.AddrPort
		var at time.Time
		for a, t := range m.knownMasters {
			if at.IsZero() || t.Before(at) {
				oldest, at = a, t
			}
		}
		delete(m.knownMasters, oldest)
	}
	m.knownMasters[from] = m.now
}

// isKnownMaster: from acted as a master within the last election timeout.
func (m *Machine) isKnownMaster(from netip.AddrPort) bool {
	at, ok := m.knownMasters[from]
	return ok && m.now.Sub(at) <= m.cfg.ElectionMax
}

// obeysQuit decides whether a QUIT from peer ends this daemon's candidacy
// or mastership: the sender must be trusted and either have acted as a
// master, or be on an explicit -F list (BSD's slaves suppress an untrusted
// candidate or master with QUIT).
func (m *Machine) obeysQuit(from netip.AddrPort) bool {
	if !m.isTrusted(from) {
		return false
	}
	return m.isKnownMaster(from) || m.trusted != nil
}
