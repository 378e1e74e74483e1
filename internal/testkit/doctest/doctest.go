// Package doctest reads the repository's documentation for the tests that
// hold it to the code: the pages (README.md, docs/*.md and the chart's
// README), their fenced blocks with the line before each (where a block
// says why it is not run), their inline code spans, their links and the
// anchors their headings make, and the command lines they show.
//
// The checks themselves live beside what they check: cmd/inboxctl runs the
// inboxctl command lines, internal/metrics checks metric and alert names,
// pkg/config config keys, and this package's own tests the links and the
// blocks' markers.
package doctest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// NotRunMarker matches the HTML comment, on the line before a command
// block, that says why the block is not run here: <!-- docs check: not
// run: REASON --> (README.md's <!-- make readme: not run: REASON --> too).
var NotRunMarker = regexp.MustCompile(`^<!-- (?:docs check|make readme): not run: \S.* -->$`)

// Root returns the repository's root: the nearest directory above the
// test's working directory that holds go.mod and docs/.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if isFile(filepath.Join(dir, "go.mod")) && isDir(filepath.Join(dir, "docs")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("doctest: no repository root (go.mod beside docs/) above the working directory")
		}
		dir = parent
	}
}

func isFile(path string) bool { fi, err := os.Stat(path); return err == nil && fi.Mode().IsRegular() }
func isDir(path string) bool  { fi, err := os.Stat(path); return err == nil && fi.IsDir() }

// Pages loads every page of the documentation: README.md, docs/*.md and
// charts/*/README.md, by their paths from root.
func Pages(t testing.TB, root string) []*Page {
	t.Helper()
	paths := []string{"README.md"}
	for _, pattern := range []string{"docs/*.md", "charts/*/README.md"} {
		more, err := filepath.Glob(filepath.Join(root, pattern))
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range more {
			rel, _ := filepath.Rel(root, p)
			paths = append(paths, filepath.ToSlash(rel))
		}
	}
	pages := make([]*Page, 0, len(paths))
	for _, p := range paths {
		pages = append(pages, Load(t, root, p))
	}
	return pages
}

// Page is one Markdown page, read and split.
type Page struct {
	// Path is the page's path from the repository's root.
	Path string
	// Lines are its lines, without their line ends.
	Lines []string
	// Blocks are its fenced blocks, in order.
	Blocks []Block
	// Spans are its inline code spans outside the blocks, in order.
	Spans []Span
}

// Block is a fenced block.
type Block struct {
	// Lang is the fence's info string: "sh", "yaml", "" …
	Lang string
	// Line is the opening fence's line, from 1.
	Line int
	// Body is the block's lines, unindented as much as the fence is.
	Body []string
	// Before is the last non-blank line before the fence.
	Before string
}

// Commands reports whether the block holds shell commands: sh, bash,
// shell or console.
func (b *Block) Commands() bool {
	return slices.Contains([]string{"sh", "bash", "shell", "console"}, b.Lang)
}

// Span is an inline code span; a span broken over lines has a space for
// each break.
type Span struct {
	Line int
	Text string
}

var fence = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")

// Load reads the page at path (from root).
func Load(t testing.TB, root, path string) *Page {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	p := &Page{Path: path, Lines: strings.Split(strings.TrimRight(string(data), "\n"), "\n")}
	var prose strings.Builder // the lines outside blocks; a block's lines are left empty
	var open *Block
	indent := ""
	before := ""
	for i, line := range p.Lines {
		if m := fence.FindStringSubmatch(line); m != nil && (open == nil || m[2] == "") {
			if open == nil {
				open, indent = &Block{Lang: m[2], Line: i + 1, Before: before}, m[1]
			} else {
				p.Blocks = append(p.Blocks, *open)
				open = nil
			}
			prose.WriteString("\n")
			continue
		}
		if open != nil {
			open.Body = append(open.Body, strings.TrimPrefix(line, indent))
			prose.WriteString("\n")
			continue
		}
		if strings.TrimSpace(line) != "" {
			before = strings.TrimSpace(line)
		}
		prose.WriteString(line + "\n")
	}
	p.Spans = spans(prose.String())
	return p
}

// spans finds the inline code spans of text (one or more backticks, then
// the same number closing), with their lines.
func spans(text string) []Span {
	var out []Span
	line := 1
	for i := 0; i < len(text); {
		switch text[i] {
		case '\n':
			line++
			i++
		case '`':
			n := 0
			for i+n < len(text) && text[i+n] == '`' {
				n++
			}
			ticks := text[i : i+n]
			end := strings.Index(text[i+n:], ticks)
			// A span does not cross a blank line (a paragraph's end).
			if end < 0 || strings.Contains(text[i+n:i+n+end], "\n\n") {
				i += n
				continue
			}
			body := text[i+n : i+n+end]
			out = append(out, Span{Line: line, Text: strings.TrimSpace(strings.ReplaceAll(body, "\n", " "))})
			line += strings.Count(body, "\n")
			i += 2*n + end
		default:
			i++
		}
	}
	return out
}

// Where names a line of the page as path:line.
func (p *Page) Where(line int) string { return p.Path + ":" + strconv.Itoa(line) }
