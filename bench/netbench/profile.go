package netbench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Profile is a set of daemon settings the benchmark runs with.
type Profile struct {
	Name string
	// Label is how the table and the plot name it.
	Label string
	// Args are timed's flags for it, after -M.
	Args []string
	// Interval is its fixed sync interval; 0 where rounds adapt.
	Interval time.Duration
}

// Profiles are the settings -profile chooses from, in the order the
// table shows them: the defaults first (adaptive rounds, 8 s up to
// 240 s), the fast profile (fixed 4 s rounds), and BSD-equivalent
// settings. The daemon has no 5 ms rounding of ADJTIME (BSD's
// mstotvround) and always measures with its own probes, so "bsd" is
// BSD's timers and arithmetic as far as the daemon's flags reach: fixed
// 240 s rounds, no frequency discipline, no makestep (slews as BSD), no
// bound on one host's influence, BSD's 20 s step threshold (the default).
// simsync's BSD mode (make bench-defaults) has the rounding too.
var Profiles = []Profile{
	{Name: "defaults", Label: "defaults", Args: nil},
	{Name: "fast", Label: "fast profile", Args: []string{"--profile", "fast"}, Interval: 4 * time.Second},
	{Name: "bsd", Label: "BSD-equivalent", Args: []string{"--sync-interval", "240s", "--sync-interval-min", "240s",
		"--frequency-discipline=false", "--makestep-count", "0", "--max-source-influence", "0"}, Interval: 240 * time.Second},
}

// ParseProfiles reads -profile: names of Profiles, comma-separated, each
// at most once, in the order given.
func ParseProfiles(s string) ([]Profile, error) {
	var ps []Profile
	seen := map[string]bool{}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(Profiles, func(p Profile) bool { return p.Name == name })
		switch {
		case i < 0:
			return nil, fmt.Errorf("profile %q: want one of %s", name, profileNames())
		case seen[name]:
			return nil, fmt.Errorf("profile %q given twice", name)
		}
		seen[name] = true
		ps = append(ps, Profiles[i])
	}
	return ps, nil
}

// profileNames lists Profiles' names, for messages.
func profileNames() string {
	names := make([]string, len(Profiles))
	for i, p := range Profiles {
		names[i] = p.Name
	}
	return strings.Join(names, ", ")
}
