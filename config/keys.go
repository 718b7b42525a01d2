package config

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// ToolingEnv are the TIMED_* environment variables that the project's own
// tooling uses and that are not configuration: the daemon ignores them
// instead of calling them unknown keys. This is the one list of them.
//
//   - TIMED_VECTORS: the folder of captured BSD packets (internal/vectors).
//   - TIMED_SEED: the seed of the randomised simulations (election/simnet).
//   - TIMED_IMAGE: the image of the end-to-end suite (tests/e2e, make e2e).
//   - TIMED_E2E_*: the end-to-end suite's run label, figures file, attacker
//     binary and whatever it adds later (tests/e2e, make e2e).
//   - TIMED_VM_CACHE: where tests/vm/assets.sh keeps Debian's kernel and
//     busybox for the suite of real kernels (make e2e-vm, whose own
//     settings are TIMED_E2E_VM_*).
//
// A name ending in "*" is a prefix. TIMED_AUTH_KEYS is not here: it is the
// key auth-keys, which timedc reads too.
var ToolingEnv = []string{"TIMED_VECTORS", "TIMED_SEED", "TIMED_IMAGE", "TIMED_E2E_*", "TIMED_VM_CACHE"}

// Keys are the configuration's keys, sorted: the long options, which are
// the file's keys and, upper-cased with underscores, the environment
// variables' stems.
func Keys() []string {
	fs := pflag.NewFlagSet("keys", pflag.ContinueOnError)
	AddFlags(fs)
	var keys []string
	fs.VisitAll(func(f *pflag.Flag) { keys = append(keys, f.Name) })
	sort.Strings(keys)
	return keys
}

// UnknownKeyError is a key the configuration does not have, in the file or
// the environment, with the nearest known key when one is near.
type UnknownKeyError struct {
	Key     string // as written: the file's key, or the variable's name
	Where   string // "FILE:LINE", or "the environment"
	Suggest string // the nearest known key, written the same way; "" if none is near
	Note    string // more to say, e.g. that keys are flat
}

func (e *UnknownKeyError) Error() string {
	var msg string
	if e.Where == "the environment" {
		msg = fmt.Sprintf("unknown environment variable %s", e.Key)
	} else {
		msg = fmt.Sprintf("unknown key %q in %s", e.Key, e.Where)
	}
	var hints []string
	if e.Note != "" {
		hints = append(hints, e.Note)
	}
	if e.Suggest != "" {
		if e.Where == "the environment" {
			hints = append(hints, "did you mean "+e.Suggest+"?")
		} else {
			hints = append(hints, fmt.Sprintf("did you mean %q?", e.Suggest))
		}
	}
	if len(hints) > 0 {
		msg += " (" + strings.Join(hints, "; ") + ")"
	}
	return msg
}

// normalize makes a key comparable across spellings: lower case, dashes
// for underscores.
func normalize(key string) string {
	return strings.ReplaceAll(strings.ToLower(key), "_", "-")
}

// nearest is the known key closest to key by edit distance, or "" when
// none is close enough to be what was meant: at most a third of the
// key's length away (and at least one edit always counts as near).
func nearest(key string, known []string) string {
	key = normalize(key)
	best, bestDist := "", -1
	for _, k := range known {
		d := editDistance(key, k)
		if bestDist < 0 || d < bestDist {
			best, bestDist = k, d
		}
	}
	if bestDist < 0 || bestDist > max(1, len(key)/3) {
		return ""
	}
	return best
}

// editDistance is Levenshtein's distance between a and b, in bytes (keys
// are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func isKnown(key string, known []string) bool {
	i := sort.SearchStrings(known, key)
	return i < len(known) && known[i] == key
}

// fileKeys checks the top-level keys of a parsed YAML document: each must
// be a known key (compared as viper does, ignoring case), given once. It
// returns the keys found, lower-cased, and an error for each bad one.
func fileKeys(path string, doc *yaml.Node) (map[string]bool, []error) {
	found := map[string]bool{}
	if doc == nil || len(doc.Content) == 0 {
		return found, nil // an empty file
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return found, []error{fmt.Errorf("%s:%d: the file must be a map of key: value lines, not a %s", path, root.Line, kindName(root.Kind))}
	}
	known := Keys()
	lines := map[string]int{}
	var errs []error
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, val := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("%s:%d", path, k.Line)
		key := strings.ToLower(k.Value)
		switch {
		case k.Kind != yaml.ScalarNode:
			errs = append(errs, fmt.Errorf("%s: a key must be a name, not a %s", where, kindName(k.Kind)))
			continue
		case key == "config":
			errs = append(errs, &UnknownKeyError{Key: k.Value, Where: where, Note: "a file cannot name another file: use --config or TIMED_CONFIG"})
			continue
		case !isKnown(key, known):
			errs = append(errs, unknownFileKey(k.Value, val, where, known))
			continue
		}
		if first, dup := lines[key]; dup {
			errs = append(errs, fmt.Errorf("%s: key %q given twice (first at line %d)", where, k.Value, first))
			continue
		}
		lines[key] = k.Line
		found[key] = true
	}
	return found, errs
}

// unknownFileKey names an unknown key and what was meant. A map under an
// unknown key is nested YAML, which the schema does not have: its flat
// spelling (sync: {interval: 10s} is sync-interval) is suggested when
// that is a key.
func unknownFileKey(key string, val *yaml.Node, where string, known []string) error {
	e := &UnknownKeyError{Key: key, Where: where, Suggest: nearest(key, known)}
	if val.Kind == yaml.MappingNode {
		e.Note = "keys are flat, without nested maps"
		for i := 0; i+1 < len(val.Content); i += 2 {
			if flat := normalize(key + "-" + val.Content[i].Value); isKnown(flat, known) {
				e.Suggest = flat
				break
			}
		}
	}
	return e
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.SequenceNode:
		return "list"
	case yaml.MappingNode:
		return "map"
	case yaml.ScalarNode:
		return "single value"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}

// envKeys checks every TIMED_* variable of environ: each must be a key's
// variable (TIMED_ and the key upper-cased, dashes as underscores) or
// belong to the tooling (ToolingEnv).
func envKeys(environ []string) []error {
	known := Keys()
	var errs []error
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		stem, ok := strings.CutPrefix(name, EnvPrefix+"_")
		if !ok || tooling(name) {
			continue
		}
		key := normalize(stem)
		if isKnown(key, known) && stem == strings.ToUpper(stem) {
			continue
		}
		e := &UnknownKeyError{Key: name, Where: "the environment"}
		if s := nearest(stem, known); s != "" {
			e.Suggest = EnvName(s)
		}
		errs = append(errs, e)
	}
	return errs
}

func tooling(name string) bool {
	for _, t := range ToolingEnv {
		if p, ok := strings.CutSuffix(t, "*"); ok && strings.HasPrefix(name, p) || name == t {
			return true
		}
	}
	return false
}

// EnvName is the environment variable of key: sync-interval is
// TIMED_SYNC_INTERVAL.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}
