package timed

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/timed-project/timed/clocksync"
)

// The drift file (--drift-file) keeps the frequency discipline's estimate
// across restarts, as chrony's driftfile does: without it every start
// begins from the kernel's setting, which a reboot resets to 0, and the
// discipline needs several rounds to learn the rate again, rounds in
// which the clock drifts at its natural rate. It holds one number, the
// frequency correction in ppm (positive: the clock is made to run
// faster), and a newline. It is read once at start; written every
// driftSaveEvery and at stop, atomically (a temporary file in the same
// directory, synced, then renamed over it), so a crash leaves the old
// file or the new one, never half of one.

// driftSaveEvery is how often the estimate is saved while running.
const driftSaveEvery = time.Hour

// readDrift reads a drift file. A missing file is normal (the first start)
// and says so at Info; a file that is not one number, or whose number is
// beyond what a clock's frequency can be corrected by (±MaxFrequencyPPM),
// is ignored with a warning: the daemon starts from the kernel's setting
// instead. ok says whether ppm is to be used.
func readDrift(path string, log logrus.FieldLogger) (ppm float64, ok bool) {
	log = log.WithField("drift_file", path)
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		log.Info("no drift file yet: starting from the clock's frequency setting")
		return 0, false
	case err != nil:
		log.WithError(err).Warn("drift file unreadable: ignored")
		return 0, false
	}
	ppm, err = parseDrift(b)
	if err != nil {
		log.WithError(err).Warn("drift file ignored")
		return 0, false
	}
	log.WithField("frequency_ppm", ppm).Info("frequency estimate from the drift file")
	return ppm, true
}

// parseDrift is a drift file's number, or why it is not one.
func parseDrift(b []byte) (float64, error) {
	fields := strings.Fields(string(b))
	if len(fields) != 1 {
		return 0, fmt.Errorf("corrupt: want one number of ppm, got %q", truncate(string(b), 40))
	}
	ppm, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || math.IsNaN(ppm) || math.IsInf(ppm, 0) {
		return 0, fmt.Errorf("corrupt: %q is not a number of ppm", truncate(fields[0], 40))
	}
	if math.Abs(ppm) > clocksync.MaxFrequencyPPM {
		return 0, fmt.Errorf("absurd: %g ppm is beyond ±%d ppm", ppm, clocksync.MaxFrequencyPPM)
	}
	return ppm, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// writeDrift writes ppm to path atomically, mode 0644.
func writeDrift(path string, ppm float64) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("drift file: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = fmt.Fprintf(tmp, "%.6f\n", ppm); err != nil {
		return fmt.Errorf("drift file: %w", err)
	}
	if err = tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("drift file: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("drift file: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("drift file: %w", err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("drift file: %w", err)
	}
	return nil
}

// initialFrequency is where the discipline starts: the drift file's
// estimate when there is a good one (set on the clock at once, so that it
// runs at it from the start), else the clock's own setting, so that a
// restart does not throw away what the kernel has learnt.
func (d *Daemon) initialFrequency() float64 {
	if d.driftPath != "" {
		if ppm, ok := readDrift(d.driftPath, d.log); ok {
			if err := d.clock.SetFrequency(ppm); err != nil {
				d.log.WithError(err).Warn("drift file: could not set the clock's frequency")
			}
			return ppm
		}
	}
	if st, err := d.clock.State(); err == nil {
		return st.FrequencyPPM
	}
	return 0
}

// saveDrift writes the discipline's estimate to the drift file, if there
// is one; a failure is logged and the daemon goes on.
func (d *Daemon) saveDrift() {
	if d.driftPath == "" {
		return
	}
	ppm, _, ok := d.applier.Frequency()
	if !ok {
		return
	}
	if err := writeDrift(d.driftPath, ppm); err != nil {
		d.log.WithError(err).Warn("frequency estimate not saved")
		return
	}
	d.log.WithFields(logrus.Fields{"drift_file": d.driftPath, "frequency_ppm": ppm}).Debug("frequency estimate saved")
}

// saveDriftEvery saves the estimate every interval until the daemon stops.
func (d *Daemon) saveDriftEvery(interval time.Duration) {
	if d.driftPath == "" {
		return
	}
	d.after(interval, func() {
		d.saveDrift()
		d.saveDriftEvery(interval)
	})
}
