// Command gencopyright writes the Debian copyright file of the timed
// package (machine-readable format 1.0) for the binaries given: the
// project's own paragraph, then one for Go's runtime and standard library
// and one for every module linked into them, read from the binaries' build
// information, with its license classified from the LICENSE file in the
// module cache. The binaries are static, so the package redistributes all
// of that code and its copyright file must say whose it is.
//
// Apache-2.0 and MPL-2.0 point to /usr/share/common-licenses; every other
// license is quoted from the module's own file. A license file it cannot
// classify is an error, not a guess.
//
//	go run ./packaging/gencopyright -contact 'Name <addr>' bin/timed bin/timedc > copyright
package main

import (
	"debug/buildinfo"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

func main() {
	contact := flag.String("contact", "", "Upstream-Contact")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: gencopyright [-contact C] BINARY...")
		os.Exit(2)
	}
	if err := run(os.Stdout, *contact, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "gencopyright:", err)
		os.Exit(1)
	}
}

// project is the paragraph of the project's own code. It has not chosen a
// license yet; the paragraph says so rather than invent one.
const project = `Files: *
Copyright: the timed project authors
License: none-chosen
 The timed project has not published a license for its own code yet.
 Until it does, no license is granted beyond what the law allows; the
 third-party code below is under the licenses stated for it.
`

type module struct{ path, version, dir string }

func run(w io.Writer, contact string, binaries []string) error {
	mods := map[string]module{}
	var goVersion string
	for _, b := range binaries {
		info, err := buildinfo.ReadFile(b)
		if err != nil {
			return err
		}
		goVersion = info.GoVersion
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			mods[d.Path] = module{path: d.Path, version: d.Version}
		}
	}
	cache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	goroot, err := goEnv("GOROOT")
	if err != nil {
		return err
	}

	fmt.Fprintln(w, "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/")
	fmt.Fprintln(w, "Upstream-Name: timed")
	if contact != "" {
		fmt.Fprintln(w, "Upstream-Contact:", contact)
	}
	fmt.Fprintln(w, "Source: https://github.com/timed-project/timed")
	fmt.Fprintln(w, "Comment: /usr/sbin/timed and /usr/bin/timedc are static Go binaries:")
	fmt.Fprintln(w, " besides the project's code they hold Go's runtime and standard library")
	fmt.Fprintln(w, " ("+goVersion+") and the Go modules listed below, each in its own paragraph.")
	fmt.Fprintln(w)
	fmt.Fprint(w, project)

	paras := []module{{path: "go.dev (Go " + strings.TrimPrefix(goVersion, "go") + ": runtime and standard library)", dir: goroot}}
	paths := make([]string, 0, len(mods))
	for p := range mods {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		m := mods[p]
		m.dir = filepath.Join(cache, escape(m.path)+"@"+escape(m.version))
		paras = append(paras, m)
	}
	for _, m := range paras {
		text, notice, err := licenseFiles(m.dir)
		if err != nil {
			return fmt.Errorf("%s: %w", m.path, err)
		}
		name, common := classify(text)
		if name == "" {
			return fmt.Errorf("%s: cannot tell the license of %s", m.path, m.dir)
		}
		fmt.Fprintln(w)
		files := m.path + "/*"
		if m.version == "" {
			files = "go/*"
			fmt.Fprintf(w, "Files: %s\n", files)
			fmt.Fprintf(w, "Comment: %s\n", m.path)
		} else {
			fmt.Fprintf(w, "Files: %s\n", files)
			fmt.Fprintf(w, "Comment: Go module %s %s\n", m.path, m.version)
		}
		if notice != "" {
			fmt.Fprintln(w, " .")
			fmt.Fprint(w, indent("NOTICE: "+notice))
		}
		fmt.Fprintf(w, "Copyright: %s\n", copyrights(text+"\n"+notice, m.path))
		if common {
			fmt.Fprintf(w, "License: %s\n On Debian systems the full text of the license is in\n /usr/share/common-licenses/%s.\n", name, name)
		} else {
			fmt.Fprintf(w, "License: %s\n%s", name, indent(text))
		}
	}
	return nil
}

func goEnv(key string) (string, error) {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", key, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// escape is the module cache's case encoding: an upper-case letter is '!'
// and the letter in lower case.
func escape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

// licenseFiles reads the module's license and, if it has one, its NOTICE
// (which Apache-2.0 requires to be passed on).
func licenseFiles(dir string) (license, notice string, err error) {
	for _, n := range []string{"LICENSE", "LICENSE.txt", "LICENSE.md", "LICENCE", "COPYING", "LICENSE-MIT"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err == nil {
			license = string(b)
			break
		}
	}
	if license == "" {
		return "", "", errors.New("no license file in " + dir + " (run make build first: it fills the module cache)")
	}
	if b, err := os.ReadFile(filepath.Join(dir, "NOTICE")); err == nil {
		notice = strings.TrimSpace(string(b))
	}
	return license, notice, nil
}

// classify names a license text with its SPDX short name, and says whether
// Debian ships its text in /usr/share/common-licenses.
func classify(text string) (name string, common bool) {
	t := strings.Join(strings.Fields(text), " ")
	switch {
	case strings.Contains(t, "licensed under the MIT and Apache"), strings.Contains(t, "two different licenses: MIT and Apache"):
		return "Expat and Apache-2.0", false
	case strings.Contains(t, "Apache License") && strings.Contains(t, "Version 2.0"):
		return "Apache-2.0", true
	case strings.Contains(t, "Mozilla Public License") && strings.Contains(t, "2.0"):
		return "MPL-2.0", true
	case strings.Contains(t, "Permission is hereby granted, free of charge"):
		return "Expat", false
	case strings.Contains(t, "Redistribution and use in source and binary forms"):
		if strings.Contains(t, "Neither the name") || strings.Contains(t, "names of its contributors") || strings.Contains(t, "name of the copyright holder") {
			return "BSD-3-clause", false
		}
		return "BSD-2-clause", false
	}
	return "", false
}

var copyrightLine = regexp.MustCompile(`(?mi)^\s*copyright\s+(?:\(c\)\s*|©\s*)?(\d{4}.*)$`)

// copyrights are the copyright lines of the license file and NOTICE, or
// the module's authors when they name none (as Apache's text does).
func copyrights(text, path string) string {
	var out []string
	seen := map[string]bool{}
	for _, m := range copyrightLine.FindAllStringSubmatch(text, -1) {
		c := strings.TrimSpace(m[1])
		if c != "" && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return "the authors of " + path
	}
	return strings.Join(out, "\n ")
}

// indent makes text a continuation: each line one space in, empty lines
// " .", as the format wants.
func indent(text string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		l = strings.TrimRight(l, " \t\r")
		if l == "" {
			b.WriteString(" .\n")
			continue
		}
		b.WriteString(" " + l + "\n")
	}
	return b.String()
}
