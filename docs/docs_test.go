// Package docs holds the manuals (operating, security, performance,
// protocol, testing) and this test, which keeps them, README.md,
// ARCHITECTURE.md and deploy/README.md true to the code: every relative
// link and anchor leads somewhere, every flag of timed and timedc named
// exists, every `make` target named is in the Makefile, every path named
// is in the tree, every Go name cited as pkg.Name is declared, the status
// JSON table matches timed/control's types, and the offline examples
// (```console blocks) print what they say.
package docs_test

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/timed-project/timed/election"
	"github.com/timed-project/timed/timed/control"
	"github.com/timed-project/timed/tsp"
)

// root is the module's root, from this package's folder.
const root = ".."

// documents are the files this test holds to the code.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := append([]string{"README.md", "ARCHITECTURE.md", "deploy/README.md"}, relAll(t, docs)...)
	for _, f := range files {
		if _, err := os.Stat(filepath.Join(root, f)); err != nil {
			t.Fatalf("document %s: %v", f, err)
		}
	}
	return files
}

func relAll(t *testing.T, paths []string) []string {
	var out []string
	for _, p := range paths {
		r, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, filepath.ToSlash(r))
	}
	return out
}

// doc is one markdown file: its prose (code blocks blanked, so that
// links and spans are read from prose only), its code blocks, and its
// inline code spans.
type doc struct {
	path   string
	prose  string
	blocks []block
	spans  []string
}

type block struct {
	lang  string
	lines []string
	line  int // of the opening fence
}

func read(t *testing.T, path string) doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	d := doc{path: path}
	var prose strings.Builder
	var cur *block
	for i, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &block{lang: strings.TrimPrefix(trimmed, "```"), line: i + 1}
			prose.WriteString("\n")
		case cur != nil && trimmed == "```":
			d.blocks = append(d.blocks, *cur)
			cur = nil
			prose.WriteString("\n")
		case cur != nil:
			cur.lines = append(cur.lines, line)
			prose.WriteString("\n")
		case strings.HasPrefix(line, "    ") && strings.TrimSpace(line) != "":
			// An indented code block: code, not prose.
			d.blocks = append(d.blocks, block{lang: "indented", lines: []string{line[4:]}, line: i + 1})
			prose.WriteString("\n")
		default:
			prose.WriteString(line + "\n")
		}
	}
	if cur != nil {
		t.Errorf("%s:%d: code block not closed", path, cur.line)
	}
	d.prose = prose.String()
	for _, m := range spanRe.FindAllStringSubmatch(d.prose, -1) {
		d.spans = append(d.spans, m[1])
	}
	return d
}

var (
	spanRe    = regexp.MustCompile("`([^`\n]+)`")
	linkRe    = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	headingRe = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	anchorRe  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// anchors are a markdown file's heading anchors, as GitHub makes them
// (lower case, punctuation dropped, spaces to hyphens, repeats numbered),
// and its explicit <a id> / <a name> anchors.
func anchors(t *testing.T, path string) map[string]bool {
	d := read(t, path)
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range headingRe.FindAllStringSubmatch(d.prose, -1) {
		s := slug(m[1])
		if n := seen[s]; n > 0 {
			out[fmt.Sprintf("%s-%d", s, n)] = true
		} else {
			out[s] = true
		}
		seen[s]++
	}
	for _, m := range anchorRe.FindAllStringSubmatch(d.prose, -1) {
		out[m[1]] = true
	}
	return out
}

func slug(heading string) string {
	heading = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(heading, "$1") // a link's text
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// TestLinks: every relative link of the documents leads to a file or
// folder of the tree, and every #anchor to a heading (or <a id>) of the
// markdown file it names.
func TestLinks(t *testing.T) {
	for _, path := range documents(t) {
		d := read(t, path)
		for _, m := range linkRe.FindAllStringSubmatch(d.prose, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.ToSlash(filepath.Join(filepath.Dir(path), file))
				if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
					t.Errorf("%s: link %s: no %s in the tree", path, target, resolved)
					continue
				}
			}
			if anchor != "" && strings.HasSuffix(resolved, ".md") && !anchors(t, resolved)[anchor] {
				t.Errorf("%s: link %s: %s has no heading #%s", path, target, resolved, anchor)
			}
		}
	}
}

// commands builds timed and timedc once, into a folder of the test's.
var commands = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "timed-docs-")
	if err != nil {
		return "", err
	}
	for _, c := range []string{"timed", "timedc"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, c), "../cmd/"+c).CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build %s: %w\n%s", c, err, out)
		}
	}
	return dir, nil
})

func TestMain(m *testing.M) {
	code := m.Run()
	if dir, err := commands(); err == nil {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

func bin(t *testing.T) string {
	t.Helper()
	dir, err := commands()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

var (
	flagLineRe = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)
	subcmdRe   = regexp.MustCompile(`^\s{2}([a-z][a-z0-9-]*)\s{2,}`)
)

// hiddenFlags are flags the help does not list, with the file that
// declares each: the test checks that it still does.
var hiddenFlags = map[string]string{"bsd-compat": "cmd/timed/main.go"}

// flags is every long flag of a command and of its subcommands, read
// from their help, which is the command tree's own account of them.
func flags(t *testing.T, command string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	var walk func(path []string)
	walk = func(path []string) {
		args := append(append([]string{}, path[1:]...), "--help")
		cmd := exec.Command(filepath.Join(bin(t), path[0]), args...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + t.TempDir()}
		help, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s --help: %v", strings.Join(path, " "), err)
		}
		section := ""
		sc := bufio.NewScanner(bytes.NewReader(help))
		for sc.Scan() {
			line := sc.Text()
			if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
				section = line
				continue
			}
			switch section {
			case "Flags:", "Global Flags:":
				if m := flagLineRe.FindStringSubmatch(line); m != nil {
					out[m[1]] = true
				}
			case "Available Commands:":
				if m := subcmdRe.FindStringSubmatch(line); m != nil && m[1] != "help" && m[1] != "completion" {
					walk(append(append([]string{}, path...), m[1]))
				}
			}
		}
	}
	walk([]string{command})
	if len(out) < 5 {
		t.Fatalf("%s: %d flags read from its help: the help's layout is not what this test reads", command, len(out))
	}
	return out
}

var (
	longFlagRe = regexp.MustCompile(`(?:^|\s|\[|\()--([a-z0-9][a-z0-9-]*)`)
	makeRe     = regexp.MustCompile(`^(?:sudo )?make\s+([A-Za-z0-9_.=-]+(?:\s+[A-Za-z0-9_.=-]+)*)`)
)

// commandText is what a document says to type: its code spans and its
// code blocks' lines.
func commandText(d doc) []string {
	text := append([]string{}, d.spans...)
	for _, b := range d.blocks {
		text = append(text, b.lines...)
	}
	return text
}

// TestFlags: every --flag that the documents give timed or timedc (in a
// span or code line that runs timed or timedc, or in a span that is the
// flag itself) is one of theirs.
func TestFlags(t *testing.T) {
	known := flags(t, "timed")
	for f := range flags(t, "timedc") {
		known[f] = true
	}
	for f, file := range hiddenFlags {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil || !bytes.Contains(b, []byte(`"`+f+`"`)) {
			t.Errorf("hidden flag --%s: not declared in %s any more", f, file)
		}
		known[f] = true
	}
	for _, path := range documents(t) {
		for _, s := range commandText(read(t, path)) {
			s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "$ "))
			ours := strings.HasPrefix(s, "--")
			for _, c := range []string{"timed ", "timedc ", "bin/timed ", "bin/timedc ", "/timedc ", "timed\t"} {
				ours = ours || strings.HasPrefix(s, c) || strings.Contains(s, " "+c)
			}
			if !ours {
				continue
			}
			for _, m := range longFlagRe.FindAllStringSubmatch(s, -1) {
				if !known[m[1]] {
					t.Errorf("%s: %q names --%s, which neither timed nor timedc has", path, s, m[1])
				}
			}
		}
	}
}

// TestMakeTargets: every `make TARGET` the documents give to type (a span
// or a code line that starts with make) is a target of the Makefile.
func TestMakeTargets(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	if !targets["test"] || !targets["demo"] {
		t.Fatalf("Makefile targets read: %v", targets)
	}
	for _, path := range documents(t) {
		for _, s := range commandText(read(t, path)) {
			s = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(s), "$ "))
			m := makeRe.FindStringSubmatch(s)
			if m == nil {
				continue
			}
			for _, w := range strings.Fields(m[1]) {
				if strings.Contains(w, "=") {
					continue // a variable
				}
				if !targets[w] {
					t.Errorf("%s: %q: make has no target %s", path, s, w)
				}
				break // the target; what follows is its variables, or a comment
			}
		}
	}
}

// topDirs are the tree's top folders: a span that starts with one of them
// and a slash names a path of the tree.
func topDirs(t *testing.T) []string {
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && e.Name() != "bin" && e.Name() != "build" {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs
}

var pathRe = regexp.MustCompile(`(?:^|[\s(=])(\.?/?[a-z][a-z0-9_.-]*/[A-Za-z0-9_./…*<>-]*)`)

// TestPaths: every path of the tree that the documents name (a span or a
// code line's word that starts with one of the tree's top folders) is
// there. "…" and "..." end a path ("election/…" is the folder).
func TestPaths(t *testing.T) {
	dirs := topDirs(t)
	for _, path := range documents(t) {
		for _, s := range commandText(read(t, path)) {
			for _, m := range pathRe.FindAllStringSubmatch(s, -1) {
				p := strings.TrimPrefix(strings.TrimPrefix(m[1], "."), "/")
				p, _, _ = strings.Cut(p, "…")
				p, _, _ = strings.Cut(p, "...")
				if i := strings.LastIndex(p, "/"); i >= 0 {
					if dir, name, ok := strings.Cut(p[i:], "."); ok && name != "" && unicode.IsUpper(rune(name[0])) {
						p = p[:i] + dir // a Go name: timed/control.Status
					}
				}
				p = strings.TrimRight(p, "/.,")
				top, _, _ := strings.Cut(p, "/")
				if !slices.Contains(dirs, top) || strings.ContainsAny(p, "<*") {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("%s: %q names %s, which is not in the tree", path, strings.TrimSpace(s), p)
				}
			}
		}
	}
}

// declared is every Go name of the module's packages, by package name:
// top-level declarations, and Type.Member for methods, struct fields and
// interface methods. Package main is left out (cmd/…).
func declared(t *testing.T) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if n := e.Name(); p != root && (strings.HasPrefix(n, ".") || n == "bin" || n == "build" || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		if f.Name.Name == "main" {
			return nil
		}
		names := out[f.Name.Name]
		if names == nil {
			names = map[string]bool{}
			out[f.Name.Name] = names
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					names[d.Name.Name] = true
					continue
				}
				typ := d.Recv.List[0].Type
				if s, ok := typ.(*ast.StarExpr); ok {
					typ = s.X
				}
				if g, ok := typ.(*ast.IndexExpr); ok {
					typ = g.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					names[id.Name+"."+d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.ValueSpec:
						for _, n := range s.Names {
							names[n.Name] = true
						}
					case *ast.TypeSpec:
						names[s.Name.Name] = true
						var fields *ast.FieldList
						switch ty := s.Type.(type) {
						case *ast.StructType:
							fields = ty.Fields
						case *ast.InterfaceType:
							fields = ty.Methods
						}
						if fields != nil {
							for _, fl := range fields.List {
								for _, n := range fl.Names {
									names[s.Name.Name+"."+n.Name] = true
								}
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fileSuffixes are what follows "timed." and the like in a file's name,
// not a Go name.
var fileSuffixes = []string{"yaml", "yml", "json", "md", "go", "service", "sock", "keys", "conf", "deb", "png",
	"tmpfiles", "sysusers", "example", "fish", "txt", "sh", "figures"}

var goNameRe = regexp.MustCompile(`^([a-z][a-z0-9]*)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(\))?$`)

// TestGoNames: every code span of the documents written pkg.Name or
// pkg.Type.Member, pkg being one of the module's package names, names a
// declaration of that package, so that a map of the code cannot point at
// what has been renamed.
func TestGoNames(t *testing.T) {
	decls := declared(t)
	if !decls["election"]["Host.Step"] || !decls["timed"]["netRuntime.do"] || !decls["clocksync"]["Clock.Adjust"] {
		t.Fatalf("declarations read: the reader misses election.Host.Step, timed.netRuntime.do or clocksync.Clock.Adjust")
	}
	cited := 0
	for _, path := range documents(t) {
		for _, s := range read(t, path).spans {
			m := goNameRe.FindStringSubmatch(s)
			if m == nil || decls[m[1]] == nil || slices.Contains(fileSuffixes, m[2]) {
				continue
			}
			name := m[2]
			if m[3] != "" {
				name += "." + m[3]
			}
			cited++
			if !decls[m[1]][name] {
				t.Errorf("%s: `%s`: package %s declares no %s", path, s, m[1], name)
			}
		}
	}
	if cited < 50 {
		t.Errorf("only %d Go names cited in the documents: ARCHITECTURE.md names more", cited)
	}
}

// jsonFields is every JSON field name of a type and of the types it
// holds.
func jsonFields(t reflect.Type, out map[string]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || out[t.String()] {
		return
	}
	out[t.String()] = true
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out[name] = true
		}
		jsonFields(f.Type, out)
	}
}

// topJSON is a struct type's own JSON field names.
func topJSON(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// TestStatusJSONTable: the operating manual's table of timedc's JSON
// names, in its status and sources rows, every field of control.Status,
// control.Sync and control.Source, and no field that is not one of
// timed/control's.
func TestStatusJSONTable(t *testing.T) {
	d := read(t, "docs/operating.md")
	rows := map[string]string{}
	for _, line := range strings.Split(d.prose, "\n") {
		for _, cmd := range []string{"status", "sources"} {
			if strings.HasPrefix(line, "| `"+cmd+"` |") {
				rows[cmd] = line
			}
		}
	}
	known := map[string]bool{"host": true, "error": true, "schema_version": true, "control_socket": true} // timedc adds these
	jsonFields(reflect.TypeFor[control.Response](), known)
	for cmd, want := range map[string][]reflect.Type{
		"status":  {reflect.TypeFor[control.Status](), reflect.TypeFor[control.Sync]()},
		"sources": {reflect.TypeFor[control.Sources](), reflect.TypeFor[control.Source]()},
	} {
		row, ok := rows[cmd]
		if !ok {
			t.Errorf("docs/operating.md: no row | `%s` | in the JSON table", cmd)
			continue
		}
		var named []string
		for _, m := range spanRe.FindAllStringSubmatch(row, -1) {
			named = append(named, m[1])
		}
		for _, typ := range want {
			for _, f := range topJSON(typ) {
				if !slices.Contains(named, f) {
					t.Errorf("docs/operating.md: the %s row does not name %s's field %s", cmd, typ, f)
				}
			}
		}
		for _, n := range named {
			if regexp.MustCompile(`^[a-z][a-z0-9_]*$`).MatchString(n) && !known[n] && n != cmd {
				t.Errorf("docs/operating.md: the %s row names %s, which no JSON field of timed/control is", cmd, n)
			}
		}
	}
}

// offline are the commands a ```console example may run: none touches a
// clock, the network or a daemon.
var offline = []*regexp.Regexp{
	regexp.MustCompile(`^timed config( |$)`),
	regexp.MustCompile(`^timed(c)? (--help|--version|-h|-v)$`),
	regexp.MustCompile(`^timedc ring algorithms( --json)?$`),
	regexp.MustCompile(`^printf '[^']*' > [a-z][a-z0-9.-]*$`),
}

// TestExamples runs the documents' ```console examples: each "$ " line is
// a command, run by sh in a folder of its own with timed and timedc on
// the PATH and no TIMED_* variable, and the lines under it are lines its
// output (stdout and stderr) must hold, in order ("…" skips). Only
// commands that run offline may stand there; other examples use ```sh.
func TestExamples(t *testing.T) {
	ran := 0
	for _, path := range documents(t) {
		for _, b := range read(t, path).blocks {
			if b.lang != "console" {
				continue
			}
			dir := t.TempDir()
			type step struct {
				cmd  string
				want []string
			}
			var steps []step
			for _, line := range b.lines {
				if c, ok := strings.CutPrefix(line, "$ "); ok {
					steps = append(steps, step{cmd: c})
				} else if len(steps) > 0 && strings.TrimSpace(line) != "…" && strings.TrimSpace(line) != "" {
					steps[len(steps)-1].want = append(steps[len(steps)-1].want, strings.TrimRight(line, " "))
				}
			}
			for _, s := range steps {
				if !slices.ContainsFunc(offline, func(re *regexp.Regexp) bool { return re.MatchString(s.cmd) }) {
					t.Errorf("%s:%d: %q is not a command that runs offline here: write the example as ```sh", path, b.line, s.cmd)
					continue
				}
				cmd := exec.Command("sh", "-c", s.cmd)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + bin(t) + ":/usr/bin:/bin", "HOME=" + dir}
				out, _ := cmd.CombinedOutput() // the exit status is the output's to tell (errors)
				ran++
				got := strings.Split(string(out), "\n")
				for i := range got {
					got[i] = strings.TrimRight(got[i], " ")
				}
				at := 0
				for _, w := range s.want {
					i := slices.Index(got[at:], w)
					if i < 0 {
						t.Errorf("%s:%d: `%s` printed no line %q (in order) in:\n%s", path, b.line, s.cmd, w, out)
						break
					}
					at += i + 1
				}
			}
		}
	}
	if ran == 0 {
		t.Error("no ```console example ran: the manuals' examples are not being checked")
	}
}

// replyTable renders election.Replies as the markdown table that
// docs/protocol.md holds between its reply-table markers.
func replyTable() string {
	answer := func(ty tsp.Type) string {
		if ty == tsp.Any {
			return "none"
		}
		return ty.String()
	}
	var b strings.Builder
	b.WriteString("| received | by a | BSD answers | we answer | who answers | note |\n|---|---|---|---|---|---|\n")
	for _, r := range election.Replies {
		who := "election"
		if r.Runtime {
			who = "daemon"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Type, r.Role, answer(r.BSD), answer(r.Ours), who, r.Note)
	}
	return b.String()
}

// TestReplyTable: docs/protocol.md's reply table is election.Replies,
// the table the election's tests walk, row for row.
func TestReplyTable(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- reply table: election.Replies -->\n", "<!-- end of reply table -->"
	_, rest, ok := strings.Cut(string(b), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("docs/protocol.md: no %q … %q markers", begin, end)
	}
	if want := replyTable(); strings.TrimSpace(table) != strings.TrimSpace(want) {
		t.Errorf("docs/protocol.md: the reply table is not election.Replies; it should read:\n%s", want)
	}
}

// TestReadmeIsALandingPage: README.md stays a page a newcomer reads in
// five minutes; reference material goes to docs/.
func TestReadmeIsALandingPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n > 200 {
		t.Errorf("README.md has %d lines, at most 200: move reference material to docs/", n)
	}
}
