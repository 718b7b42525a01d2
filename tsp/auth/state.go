package auth

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Files in Config.StateDir.
const (
	// SenderStateFile holds this daemon's sender identity and the highest
	// counter it may have used.
	SenderStateFile = "auth-sender.state"
	// ReplayStateFile holds, per sender heard from, the ceiling of the
	// counters accepted from it.
	ReplayStateFile = "auth-replay.state"
)

// ErrState is wrapped by every error about a state file.
var ErrState = errors.New("auth state")

// readState returns the lines of a state file (nil, nil if it does not
// exist). A file that group or others can write is refused: whoever can
// write it can lower the ceilings and so replay packets.
func readState(path string) ([]string, error) {
	f, perm, err := openStat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrState, err)
	}
	defer f.Close()
	if perm&0o022 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o, writable by group or others: run chmod 600 %s", ErrState, path, perm, path)
	}
	lines := []string{} // not nil: the file exists
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrState, path, err)
	}
	return lines, nil
}

// openStat opens a file and returns its permission bits, taken from the
// opened file so that they are the bits of the file read.
func openStat(path string) (*os.File, os.FileMode, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Mode().Perm(), nil
}

// writeState replaces path atomically and durably: a temporary file
// (mode 0600) in the same directory, written and synced, renamed over
// path, and the directory synced, so that after a crash path holds
// either the old content or the new, whole.
func writeState(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrState, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: sync %s: %w", ErrState, dir, err)
	}
	return nil
}

// stateHeader checks the first line of a state file.
func stateHeader(path string, lines []string, want string) error {
	if len(lines) == 0 || lines[0] != want {
		return fmt.Errorf("%w: %s:1: not a state file of this version (want the line %q)%s", ErrState, path, want, removeHint(path))
	}
	return nil
}

func removeHint(path string) string {
	return fmt.Sprintf("; if it is damaged, remove %s (see the package doc for what is lost)", path)
}

// skipLine reports whether a state line is blank or a comment.
func skipLine(l string) bool {
	l = strings.TrimSpace(l)
	return l == "" || l[0] == '#'
}
