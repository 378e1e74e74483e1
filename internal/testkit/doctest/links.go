package doctest

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Link is a link a page makes.
type Link struct {
	// Where is the page and line it is on.
	Where string
	// Target is the link's destination as written: a URL, a path, a
	// path#anchor or an #anchor.
	Target string
}

var (
	inlineLink = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("`[^`]*`")
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// Links returns the page's inline links outside code.
func (p *Page) Links() []Link {
	var out []Link
	inBlock := p.blockLines()
	for i, line := range p.Lines {
		if inBlock[i+1] {
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, "``"), -1) {
			out = append(out, Link{Where: p.Where(i + 1), Target: m[1]})
		}
	}
	return out
}

// Anchors returns the anchors the page's headings make, as GitHub makes
// them (Slug, with -1, -2 … for a repeated one), and those of its <a id>
// and <a name> tags.
func (p *Page) Anchors() map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	inBlock := p.blockLines()
	for i, line := range p.Lines {
		if inBlock[i+1] {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		m := heading.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			anchors[slug+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[slug] = true
		}
		seen[slug]++
	}
	return anchors
}

// blockLines reports, by line number, the lines of fenced blocks and
// their fences.
func (p *Page) blockLines() map[int]bool {
	in := map[int]bool{}
	for _, b := range p.Blocks {
		for l := b.Line; l <= b.Line+len(b.Body)+1; l++ {
			in[l] = true
		}
	}
	return in
}

// Slug is the anchor GitHub makes of a heading's text: lower case, the
// Markdown of links and code taken out, every character but letters,
// digits, spaces, hyphens and underscores dropped, spaces made hyphens.
func Slug(text string) string {
	text = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
