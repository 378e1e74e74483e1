package doctest

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestLinksResolve fails on a relative link of a page that leads nowhere:
// a file that does not exist, or an anchor no heading of its page makes.
func TestLinksResolve(t *testing.T) {
	t.Parallel()
	root := Root(t)
	anchors := map[string]map[string]bool{}
	anchorsOf := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		anchors[page] = Load(t, root, page).Anchors()
		return anchors[page]
	}
	checked := 0
	for _, p := range Pages(t, root) {
		for _, l := range p.Links() {
			if strings.Contains(l.Target, "://") || strings.HasPrefix(l.Target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(l.Target, "#")
			target := p.Path
			if file != "" {
				target = path.Clean(path.Join(path.Dir(p.Path), file))
			}
			checked++
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
				t.Errorf("%s: link %s: %s does not exist", l.Where, l.Target, target)
				continue
			}
			if anchor != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[anchor] {
				t.Errorf("%s: link %s: no heading of %s makes the anchor #%s", l.Where, l.Target, target, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the pages were not read")
	}
}

// configPointer is a comment of config/hookinbox.yaml sending the reader to
// a page, and perhaps to a section of it by its heading: `docs/x.md`,
// `(docs/x.md, "Heading")`.
var configPointer = regexp.MustCompile(`\b((?:docs/)?[\w.-]+\.md)(?:,\s*"([^"]+)")?`)

// TestConfigPointersResolve fails when config/hookinbox.yaml's comments
// point to a page that does not exist, or to a section its page does not
// have (as when README's sections moved to docs/).
func TestConfigPointersResolve(t *testing.T) {
	t.Parallel()
	root := Root(t)
	data, err := os.ReadFile(filepath.Join(root, "config", "hookinbox.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The comments, each run of comment lines joined, so that a pointer
	// broken over two lines is read whole.
	var comments []struct {
		line int
		text string
	}
	joined := false
	for i, line := range strings.Split(string(data), "\n") {
		_, comment, ok := strings.Cut(line, "# ")
		if !ok {
			joined = false
			continue
		}
		if joined {
			comments[len(comments)-1].text += " " + strings.TrimSpace(comment)
			continue
		}
		comments = append(comments, struct {
			line int
			text string
		}{i + 1, comment})
		joined = true
	}
	found := 0
	for _, c := range comments {
		for _, m := range configPointer.FindAllStringSubmatch(c.text, -1) {
			found++
			where := "config/hookinbox.yaml:" + strconv.Itoa(c.line)
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1]))); err != nil {
				t.Errorf("%s: %s does not exist", where, m[1])
				continue
			}
			if m[2] != "" && !Load(t, root, m[1]).Anchors()[Slug(m[2])] {
				t.Errorf("%s: %s has no section %q", where, m[1], m[2])
			}
		}
	}
	if found == 0 {
		t.Fatal("no pointer to a page found in config/hookinbox.yaml's comments")
	}
}

// TestCommandBlocksRunOrSayWhy fails on a command block of docs/ that is
// neither run by a check nor marked, on the line before it, with why it is
// not: <!-- docs check: not run: REASON -->. A block of inboxctl command
// lines alone is run by cmd/inboxctl's TestDocumentedCommands; README.md's
// blocks are scripts/readme-run.sh's (make readme), which has the same rule.
func TestCommandBlocksRunOrSayWhy(t *testing.T) {
	t.Parallel()
	root := Root(t)
	blocks := 0
	for _, p := range Pages(t, root) {
		if !strings.HasPrefix(p.Path, "docs/") {
			continue
		}
		for i := range p.Blocks {
			b := &p.Blocks[i]
			if !b.Commands() {
				continue
			}
			blocks++
			if NotRunMarker.MatchString(b.Before) {
				continue
			}
			for _, c := range p.BlockCommands(b) {
				if c.Program() != "inboxctl" {
					t.Errorf("%s: %q is run by no check: mark its block (line %d) with "+
						"<!-- docs check: not run: REASON --> on the line before it, or make it an inboxctl block",
						c.Where, c.Text, b.Line)
					break
				}
			}
		}
	}
	if blocks == 0 {
		t.Fatal("no command block found in docs/")
	}
}

// TestPathsExist fails when a page names, in code, a file of the
// repository that is not there (`scripts/x.sh`, `charts/…/y.sql`); a file
// .gitignore names (an output, such as bench/results/latest.json) need not
// be.
func TestPathsExist(t *testing.T) {
	t.Parallel()
	root := Root(t)
	ignore, err := os.ReadFile(filepath.Join(root, ".gitignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := strings.Split(string(ignore), "\n")
	repoFile := regexp.MustCompile(`^(?:cmd|pkg|internal|docs|scripts|charts|config|examples|migrations|bench|tools)/[\w./-]*\.[a-z]+$`)
	for _, p := range Pages(t, root) {
		for _, s := range p.Spans {
			if !repoFile.MatchString(s.Text) || slices.Contains(ignored, s.Text) {
				continue
			}
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(s.Text))); err != nil {
				t.Errorf("%s: `%s` does not exist", p.Where(s.Line), s.Text)
			}
		}
	}
}

// TestFields is the shell word splitting the command checks rely on.
func TestFields(t *testing.T) {
	t.Parallel()
	for line, want := range map[string]string{
		`inboxctl events list --since 10m   # rows received`:                  "inboxctl|events|list|--since|10m",
		`DATABASE_URL=x bin/inboxctl send --data '{"a": 1}'`:                  `bin/inboxctl|send|--data|{"a": 1}`,
		`inboxctl events verify --json > out.json`:                            "inboxctl|events|verify|--json",
		`kubectl logs deploy/w | grep -E 'reconcil'`:                          "kubectl|logs|deploy/w",
		`inboxctl replay --error "no route" --dry-run`:                        "inboxctl|replay|--error|no route|--dry-run",
		`inboxctl sources resume S  # prints how many; exits 0 as pause does`: "inboxctl|sources|resume|S",
	} {
		if got := strings.Join(Fields(line), "|"); got != want {
			t.Errorf("Fields(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestSlug is GitHub's anchors for the headings the pages link to.
func TestSlug(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"A failure at 3 a.m.":                       "a-failure-at-3-am",
		"Did we miss anything while we were down?":  "did-we-miss-anything-while-we-were-down",
		"Ports, probes and the NetworkPolicy":       "ports-probes-and-the-networkpolicy",
		"`inboxctl` and [River](https://x.example)": "inboxctl-and-river",
		"One source's storm never delays another":   "one-sources-storm-never-delays-another",
	} {
		if got := Slug(text); got != want {
			t.Errorf("Slug(%q) = %q, want %q", text, got, want)
		}
	}
}

// TestMakeTargetsExist fails when a page shows or names a make target the
// Makefile does not have (`make chart-test`, make demo's block).
func TestMakeTargetsExist(t *testing.T) {
	t.Parallel()
	root := Root(t)
	data, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z_-]*):`).FindAllStringSubmatch(string(data), -1) {
		targets[m[1]] = true
	}
	checked := 0
	for _, p := range Pages(t, root) {
		for _, c := range p.Commands("make") {
			for _, w := range c.Words[1:] {
				if strings.HasPrefix(w, "-") || strings.Contains(w, "=") {
					continue
				}
				checked++
				if !targets[w] && !c.Synopsis {
					t.Errorf("%s: %s: the Makefile has no target %q", c.Where, c.Text, w)
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no make command found in the pages")
	}
}

// TestNamedTestsExist fails when a page names a test (`TestSecretRotation`,
// `TestSequence/HeadFailingForGoodWakesTheNext`, go test -run
// TestRouteChangeRollsOut) that no _test.go file of
// the repository declares: the evidence a sentence cites must still be
// there.
func TestNamedTestsExist(t *testing.T) {
	t.Parallel()
	root := Root(t)
	declared := map[string]bool{}
	decl := regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]+)\(`)
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		for _, m := range decl.FindAllSubmatch(data, -1) {
			declared[string(m[1])] = true
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`^(Test[A-Z][A-Za-z0-9_]*)(?:/\S+)?$`)
	checked := 0
	for _, p := range Pages(t, root) {
		for _, s := range p.Spans {
			m := named.FindStringSubmatch(s.Text)
			if m == nil {
				continue
			}
			checked++
			if !declared[m[1]] {
				t.Errorf("%s: `%s`: no _test.go file declares %s", p.Where(s.Line), s.Text, m[1])
			}
		}
		// go test … -run NAME, in blocks and in prose.
		for _, c := range p.Commands("go") {
			for i, w := range c.Words {
				if w != "-run" || i+1 == len(c.Words) {
					continue
				}
				name := strings.Trim(c.Words[i+1], "^$'")
				if m := named.FindStringSubmatch(name); m != nil && !declared[m[1]] {
					t.Errorf("%s: %s: no _test.go file declares %s", c.Where, c.Text, m[1])
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no test named in the pages")
	}
}
