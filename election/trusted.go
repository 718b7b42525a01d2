package election

import "strings"

// SetTrusted replaces the trusted-host list (BSD -F), as a SIGHUP reload
// does. An empty list trusts everyone; the daemon itself is always
// trusted. It takes effect with the next packet: a master that is no
// longer trusted is suppressed when it next speaks.
func (m *Machine) SetTrusted(names []string) {
	m.cfg.Trusted = append([]string(nil), names...)
	if len(names) == 0 {
		m.trusted = nil
		return
	}
	m.trusted = map[string]bool{strings.ToLower(m.cfg.Name): true}
	for _, n := range names {
		m.trusted[strings.ToLower(n)] = true
	}
}
