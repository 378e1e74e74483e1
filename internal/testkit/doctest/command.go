package doctest

import (
	"path"
	"regexp"
	"strings"
)

// Command is a command line a page shows.
type Command struct {
	// Where is the page and line it is on.
	Where string
	// Text is the line as shown, for messages.
	Text string
	// Words are its shell words up to a comment, a pipe, a redirection or
	// a list operator, environment assignments before the program dropped.
	Words []string
	// InBlock says it is a line of a fenced block, to be run as written
	// (unless it is a Synopsis), rather than a command named in prose.
	InBlock bool
	// Synopsis says it has placeholders (SOURCE, ID..., [--limit N],
	// received|now): its verbs and flags can be checked, it cannot be run.
	Synopsis bool
}

// Program is the command's program name without its directory
// (bin/inboxctl is inboxctl); "" for an empty line.
func (c *Command) Program() string {
	if len(c.Words) == 0 {
		return ""
	}
	return path.Base(c.Words[0])
}

// Commands returns the command lines the page shows for program (by its
// name without a directory): the lines of its command blocks and of its
// unlabeled blocks that start with it, and the inline code spans that
// start with it.
func (p *Page) Commands(program string) []Command {
	var out []Command
	for i := range p.Blocks {
		b := &p.Blocks[i]
		if !b.Commands() && b.Lang != "" {
			continue
		}
		for _, c := range p.BlockCommands(b) {
			if c.Program() == program {
				out = append(out, c)
			}
		}
	}
	for _, s := range p.Spans {
		words := Fields(s.Text)
		if len(words) > 0 && path.Base(words[0]) == program {
			out = append(out, Command{Where: p.Where(s.Line), Text: s.Text, Words: words, Synopsis: synopsis(words)})
		}
	}
	return out
}

// BlockCommands returns a block's command lines: its lines after a "$ "
// prompt when it shows any, else every line that is not a comment, each
// line ending in a backslash joined to the next.
func (p *Page) BlockCommands(b *Block) []Command {
	prompted := false
	for _, l := range b.Body {
		if strings.HasPrefix(strings.TrimSpace(l), "$ ") {
			prompted = true
		}
	}
	var out []Command
	for i := 0; i < len(b.Body); i++ {
		start := i
		text := strings.TrimSpace(b.Body[i])
		for strings.HasSuffix(text, `\`) && i+1 < len(b.Body) {
			i++
			text = strings.TrimSuffix(text, `\`) + " " + strings.TrimSpace(b.Body[i])
		}
		if prompted {
			var ok bool
			if text, ok = strings.CutPrefix(text, "$ "); !ok {
				continue
			}
		}
		words := Fields(text)
		if len(words) == 0 {
			continue
		}
		out = append(out, Command{Where: p.Where(b.Line + 1 + start), Text: text, Words: words, InBlock: true, Synopsis: synopsis(words)})
	}
	return out
}

var (
	placeholder = regexp.MustCompile(`^[A-Z][A-Z0-9_]*(\.\.\.|…)?$`)
	assignment  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)
)

// synopsis reports whether words show placeholders rather than values.
func synopsis(words []string) bool {
	for _, w := range words[1:] {
		if strings.ContainsAny(w, "[]|") || strings.Contains(w, "...") || w == "…" || placeholder.MatchString(w) {
			return true
		}
	}
	return false
}

// Fields splits a shell command line into its words, as sh would without
// expanding anything: quotes and backslashes are taken out; a word starting
// with # ends the line, as does a pipe, a redirection or a list operator
// written as a word of its own. Environment assignments before the program
// are dropped.
func Fields(line string) []string {
	var words []string
	var word strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == ' ' || c == '\t':
			flush()
		case c == '#' && !inWord:
			i = len(line)
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				end = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 1
		case c == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			inWord = true
			i++
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	flush()
	for i, w := range words {
		if w == "|" || w == "||" || w == "&&" || w == ";" || w == "&" || strings.HasPrefix(w, ">") ||
			strings.HasPrefix(w, "2>") || strings.HasPrefix(w, "<") {
			words = words[:i]
			break
		}
	}
	for len(words) > 0 && assignment.MatchString(words[0]) {
		words = words[1:]
	}
	return words
}
