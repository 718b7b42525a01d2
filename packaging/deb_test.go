//go:build deb

// Package packaging checks the Debian package that make deb builds from
// packaging/nfpm.yaml: its control fields, files and their modes, the
// conffile, the maintainer scripts, what the files hold, lintian's
// verdict, and the tree make install writes. make deb-test builds the
// package and runs it with TIMED_DEB (the .deb) and TIMED_DEB_VERSION set;
// the build tag keeps it out of the unit tests, which build nothing.
package packaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func deb(t *testing.T) string {
	t.Helper()
	p := os.Getenv("TIMED_DEB")
	if p == "" {
		t.Fatal("TIMED_DEB is not set: run make deb-test")
	}
	return p
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// fields parses a control file: field name to value, continuation lines
// joined with "\n".
func fields(control string) map[string]string {
	f := map[string]string{}
	var last string
	for _, line := range strings.Split(control, "\n") {
		if line == "" {
			continue
		}
		if line[0] == ' ' && last != "" {
			f[last] += "\n" + line[1:]
			continue
		}
		k, v, _ := strings.Cut(line, ":")
		last = k
		f[k] = strings.TrimSpace(v)
	}
	return f
}

func TestControl(t *testing.T) {
	t.Parallel()
	f := fields(run(t, "dpkg-deb", "-f", deb(t)))
	want := map[string]string{
		"Package":      "timed",
		"Version":      os.Getenv("TIMED_DEB_VERSION"),
		"Architecture": runtime.GOARCH,
		"Section":      "net",
		"Priority":     "optional",
		"Provides":     "time-daemon",
		"Conflicts":    "time-daemon",
		"Replaces":     "time-daemon",
		"Depends":      "systemd | systemd-sysusers, systemd | systemd-tmpfiles",
		"Homepage":     "https://github.com/timed-project/timed",
	}
	for k, v := range want {
		if f[k] != v {
			t.Errorf("%s: %q, want %q", k, f[k], v)
		}
	}
	if !regexp.MustCompile(`^[^<>]+ <[^@<> ]+@[^@<> ]+\.[a-z]+>$`).MatchString(f["Maintainer"]) {
		t.Errorf("Maintainer %q is not Name <address>", f["Maintainer"])
	}
	synopsis, long, _ := strings.Cut(f["Description"], "\n")
	if synopsis == "" || len(synopsis) > 80 || len(strings.Fields(long)) < 20 {
		t.Errorf("Description wants a synopsis of at most 80 characters and an extended description:\n%s", f["Description"])
	}
	// Debian versions: [epoch:]upstream-revision, upstream starting with a digit.
	if !regexp.MustCompile(`^[0-9][A-Za-z0-9.+~]*-[0-9]+$`).MatchString(f["Version"]) {
		t.Errorf("Version %q is no Debian version", f["Version"])
	}
	if f["Installed-Size"] == "" || f["Installed-Size"] == "0" {
		t.Errorf("Installed-Size %q", f["Installed-Size"])
	}
}

// entry is one line of dpkg-deb -c.
type entry struct{ mode, owner string }

func listing(t *testing.T) map[string]entry {
	files := map[string]entry{}
	for _, line := range strings.Split(strings.TrimSpace(run(t, "dpkg-deb", "-c", deb(t))), "\n") {
		// drwxr-xr-x root/root 0 2026-01-02 00:00 ./usr/
		fs := strings.Fields(line)
		if len(fs) < 6 {
			t.Fatalf("dpkg-deb -c line %q", line)
		}
		path := strings.TrimPrefix(strings.TrimSuffix(fs[5], "/"), ".")
		files[path] = entry{mode: fs[0], owner: fs[1]}
	}
	return files
}

const (
	exe  = "-rwxr-xr-x"
	data = "-rw-r--r--"
)

// The files of the package and their modes. The man pages of timedc's
// commands follow the commands (another engineer's); the list checks the
// ones named in the issue and a pattern for the rest.
var wantFiles = map[string]string{
	"/usr/sbin/timed":                                  "exe",
	"/usr/bin/timedc":                                  "exe",
	"/usr/lib/systemd/system/timed.service":            data,
	"/usr/lib/systemd/system/timed-wait.service":       data,
	"/usr/lib/systemd/ntp-units.d/50-timed.list":       data,
	"/usr/lib/sysusers.d/timed.conf":                   data,
	"/usr/lib/tmpfiles.d/timed.conf":                   data,
	"/etc/timed/timed.yaml":                            data,
	"/usr/share/man/man8/timed.8.gz":                   data,
	"/usr/share/man/man8/timed-config.8.gz":            data,
	"/usr/share/man/man8/timedc.8.gz":                  data,
	"/usr/share/man/man8/timedc-status.8.gz":           data,
	"/usr/share/man/man8/timedc-step.8.gz":             data,
	"/usr/share/man/man5/timed.yaml.5.gz":              data,
	"/usr/share/bash-completion/completions/timed":     data,
	"/usr/share/bash-completion/completions/timedc":    data,
	"/usr/share/zsh/vendor-completions/_timed":         data,
	"/usr/share/zsh/vendor-completions/_timedc":        data,
	"/usr/share/fish/vendor_completions.d/timed.fish":  data,
	"/usr/share/fish/vendor_completions.d/timedc.fish": data,
	"/usr/share/doc/timed/copyright":                   data,
	"/usr/share/doc/timed/changelog.Debian.gz":         data,
	"/usr/share/lintian/overrides/timed":               data,
}

var otherPages = regexp.MustCompile(`^/usr/share/man/man8/timedc-[a-z-]+\.8\.gz$`)

func TestFiles(t *testing.T) {
	t.Parallel()
	files := listing(t)
	for path, mode := range wantFiles {
		if mode == "exe" {
			mode = exe
		}
		e, ok := files[path]
		switch {
		case !ok:
			t.Errorf("%s is not in the package", path)
		case e.mode != mode:
			t.Errorf("%s: mode %s, want %s", path, e.mode, mode)
		}
	}
	for path, e := range files {
		if e.owner != "root/root" {
			t.Errorf("%s: owner %s, want root/root", path, e.owner)
		}
		if e.mode[0] == 'd' {
			if e.mode != "drwxr-xr-x" {
				t.Errorf("%s: directory mode %s", path, e.mode)
			}
			continue
		}
		if _, ok := wantFiles[path]; !ok && !(otherPages.MatchString(path) && e.mode == data) {
			t.Errorf("%s (%s) is in the package but not expected", path, e.mode)
		}
	}
}

// extract unpacks the package's files, and its control area under DEBIAN.
func extract(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	run(t, "dpkg-deb", "-x", deb(t), dir)
	run(t, "dpkg-deb", "-e", deb(t), filepath.Join(dir, "DEBIAN"))
	return dir
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if b, err = io.ReadAll(z); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return string(b)
}

func TestControlArea(t *testing.T) {
	t.Parallel()
	dir := extract(t)
	ctl := filepath.Join(dir, "DEBIAN")
	if got := read(t, filepath.Join(ctl, "conffiles")); got != "/etc/timed/timed.yaml\n" {
		t.Errorf("conffiles: %q, want only /etc/timed/timed.yaml", got)
	}
	scripts := map[string][]string{
		"postinst": {"systemd-sysusers timed.conf", "deb-systemd-helper unmask timed.service", "systemd-tmpfiles --create timed.conf", "deb-systemd-helper enable timed.service", "daemon-reload", "deb-systemd-invoke start timed.service", "try-restart timed.service",
			"deb-systemd-helper update-state timed-wait.service"},
		"prerm":  {"deb-systemd-invoke stop timed-wait.service timed.service"},
		"postrm": {"deb-systemd-helper purge timed.service timed-wait.service", "deb-systemd-helper mask timed.service timed-wait.service", "rm -rf /var/lib/timed /run/timed"},
	}
	for name, want := range scripts {
		path := filepath.Join(ctl, name)
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if st.Mode().Perm() != 0o755 {
			t.Errorf("%s: mode %v, want 0755", name, st.Mode().Perm())
		}
		text := read(t, path)
		if !strings.HasPrefix(text, "#!/bin/sh\n") || !strings.Contains(text, "\nset -e\n") {
			t.Errorf("%s: not a #!/bin/sh script with set -e", name)
		}
		for _, w := range want {
			if !strings.Contains(text, w) {
				t.Errorf("%s lacks %q", name, w)
			}
		}
		if out, err := exec.Command("sh", "-n", path).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v %s", name, err, out)
		}
	}
}

func TestContents(t *testing.T) {
	t.Parallel()
	dir := extract(t)
	unit := read(t, filepath.Join(dir, "usr/lib/systemd/system/timed.service"))
	if !strings.Contains(unit, "\nExecStart=/usr/sbin/timed --config /etc/timed/timed.yaml\n") {
		t.Errorf("the unit does not start /usr/sbin/timed:\n%s", unit)
	}
	for _, want := range []string{"\nRuntimeDirectory=timed\n", "\nStateDirectory=timed\n", "\nUser=timed\n"} {
		if !strings.Contains(unit, want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	// timed-wait starts the package's timedc; the rest is the repository's.
	wait := read(t, filepath.Join(dir, "usr/lib/systemd/system/timed-wait.service"))
	if want := strings.Replace(read(t, "../systemd/timed-wait.service"), "/usr/local/bin/timedc", "/usr/bin/timedc", 1); wait != want ||
		!strings.Contains(wait, "\nExecStart=/usr/bin/timedc waitsync ") {
		t.Errorf("timed-wait.service does not start /usr/bin/timedc waitsync:\n%s", wait)
	}
	if got := read(t, filepath.Join(dir, "usr/lib/systemd/ntp-units.d/50-timed.list")); got != "timed.service\n" {
		t.Errorf("ntp-units.d/50-timed.list is %q, want timed.service", got)
	}
	if got, want := read(t, filepath.Join(dir, "etc/timed/timed.yaml")), read(t, "../systemd/timed.yaml.example"); got != want {
		t.Error("/etc/timed/timed.yaml is not systemd/timed.yaml.example")
	}
	if !strings.Contains(read(t, filepath.Join(dir, "usr/lib/sysusers.d/timed.conf")), "\nu timed ") {
		t.Error("the sysusers entry makes no user timed")
	}
	tmpfiles := read(t, filepath.Join(dir, "usr/lib/tmpfiles.d/timed.conf"))
	for _, want := range []string{"\nd /run/timed      0750 timed timed -\n", "\nd /var/lib/timed  0700 timed timed -\n"} {
		if !strings.Contains(tmpfiles, want) {
			t.Errorf("the tmpfiles entry lacks %q", strings.TrimSpace(want))
		}
	}

	for _, bin := range []string{"usr/sbin/timed", "usr/bin/timedc"} {
		path := filepath.Join(dir, bin)
		f, err := elf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s is dynamically linked", bin)
			}
		}
		f.Close()
		if out, err := exec.Command(path, "--version").CombinedOutput(); err != nil || !strings.Contains(string(out), "version") {
			t.Errorf("%s --version: %v %s", bin, err, out)
		}
	}

	copyright := read(t, filepath.Join(dir, "usr/share/doc/timed/copyright"))
	if !strings.HasPrefix(copyright, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n") {
		t.Error("copyright is not in the machine-readable format")
	}
	// Every module linked into the binaries has its paragraph.
	for _, line := range strings.Split(run(t, "go", "version", "-m", filepath.Join(dir, "usr/sbin/timed"), filepath.Join(dir, "usr/bin/timedc")), "\n") {
		fs := strings.Fields(line)
		if len(fs) >= 2 && fs[0] == "dep" && !strings.Contains(copyright, "\nFiles: "+fs[1]+"/*\n") {
			t.Errorf("copyright has no paragraph for %s", fs[1])
		}
	}
	changelog := read(t, filepath.Join(dir, "usr/share/doc/timed/changelog.Debian.gz"))
	if !strings.HasPrefix(changelog, "timed ("+os.Getenv("TIMED_DEB_VERSION")+") ") {
		t.Errorf("changelog.Debian.gz does not start with this version:\n%s", changelog)
	}

	// Every man page is gzipped roff that man formats without a warning.
	pages, _ := filepath.Glob(filepath.Join(dir, "usr/share/man/man*/*"))
	if len(pages) < 5 {
		t.Errorf("only %d man pages", len(pages))
	}
	for _, p := range pages {
		if !strings.HasSuffix(p, ".gz") {
			t.Errorf("%s is not gzipped", p)
			continue
		}
		page := read(t, p)
		if !strings.Contains(page, "\n.TH ") && !strings.HasPrefix(page, ".TH ") {
			t.Errorf("%s has no .TH", p)
		}
		if _, err := exec.LookPath("man"); err == nil {
			cmd := exec.Command("man", "--warnings", "-E", "UTF-8", "-l", p)
			cmd.Env = append(os.Environ(), "MANWIDTH=80", "LC_ALL=C.UTF-8")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil || stderr.Len() > 0 {
				t.Errorf("man %s: %v %s", filepath.Base(p), err, stderr.String())
			}
		}
	}
}

// lintian, once: errors fail the test, and so do overrides that no longer
// match anything; warnings and the rest are shown.
func TestLintian(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("lintian", "--tag-display-limit", "0", "--display-level", ">=info", deb(t))
	out, err := cmd.CombinedOutput()
	var errs, others []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "E: "):
			errs = append(errs, line)
		case strings.Contains(line, "unused-override"), strings.Contains(line, "mismatched-override"), strings.Contains(line, "malformed-override"):
			errs = append(errs, line)
		case strings.HasPrefix(line, "W: "), strings.HasPrefix(line, "I: "), strings.HasPrefix(line, "P: "), strings.HasPrefix(line, "N: "), strings.HasPrefix(line, "O: "):
			others = append(others, line)
		}
	}
	for _, l := range others {
		t.Log(l)
	}
	for _, l := range errs {
		t.Error(l)
	}
	if err != nil && len(errs) == 0 {
		t.Errorf("lintian: %v\n%s", err, out)
	}
}

// make install DESTDIR=… writes the same set of files as the package,
// uncompressed and under PREFIX, and says what to do next.
func TestInstall(t *testing.T) {
	t.Parallel()
	dest := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "install", "DESTDIR="+dest, "PREFIX=/usr/local", "UNITDIR=/usr/lib/systemd/system")
	cmd.Dir = ".."
	// A make inside make deb-test: not the outer one's flags or level.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=") || strings.HasPrefix(kv, "MFLAGS=")
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make install: %v\n%s", err, out)
	}
	for _, want := range []string{"systemd-sysusers timed.conf", "systemctl daemon-reload", "systemctl enable --now timed", "usermod -aG timed", "systemctl enable timed-wait"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("make install does not say %q", want)
		}
	}
	for path, mode := range wantFiles {
		switch {
		case strings.HasPrefix(path, "/usr/share/doc/"), strings.HasPrefix(path, "/usr/share/lintian/"):
			continue // the package's own
		case path == "/usr/sbin/timed", path == "/usr/bin/timedc":
			path = "/usr/local" + strings.TrimPrefix(path, "/usr")
		case strings.HasPrefix(path, "/usr/share/"):
			path = "/usr/local" + strings.TrimPrefix(strings.TrimSuffix(path, ".gz"), "/usr")
			path = strings.Replace(path, "zsh/vendor-completions", "zsh/site-functions", 1)
		}
		st, err := os.Stat(filepath.Join(dest, path))
		if err != nil {
			t.Errorf("make install: %v", err)
			continue
		}
		if got := st.Mode().String(); got != strings.Replace(mode, "exe", exe, 1) {
			t.Errorf("make install: %s has mode %s, want %s", path, got, mode)
		}
	}
	unit := read(t, filepath.Join(dest, "usr/lib/systemd/system/timed.service"))
	if !strings.Contains(unit, "\nExecStart=/usr/local/sbin/timed ") {
		t.Error("make install: the unit does not start /usr/local/sbin/timed")
	}
	if wait := read(t, filepath.Join(dest, "usr/lib/systemd/system/timed-wait.service")); !strings.Contains(wait, "\nExecStart=/usr/local/bin/timedc waitsync ") {
		t.Error("make install: timed-wait.service does not start /usr/local/bin/timedc waitsync")
	}
	// Not in the package: Debian's chrony conflicts with every
	// time-daemon, which the package provides (README, "UTC on the LAN").
	if ref := read(t, filepath.Join(dest, "usr/lib/systemd/system/timed-reference.service")); !strings.Contains(ref, "\nExecStart=/usr/local/sbin/timed --config /etc/timed/timed.yaml --reference kernel\n") {
		t.Error("make install: timed-reference.service does not start /usr/local/sbin/timed --reference kernel")
	}
}
