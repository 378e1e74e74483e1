package jetstream

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// ErrInvalidSubject is wrapped by the errors of RenderSubject,
// ValidateSubject and Publish when a subject, or a subject template, cannot
// be published to.
var ErrInvalidSubject = errors.New("invalid subject")

// The placeholders a subject template may hold.
const (
	// PlaceholderSource is replaced by the event's source name.
	PlaceholderSource = "{source}"
	// PlaceholderType is replaced by the event's type.
	PlaceholderType = "{type}"
)

// RenderSubject renders the subject template tmpl for an event of source
// and eventType.
//
// The template is a NATS subject in which {source} and {type} stand for the
// event's source name and type, whole tokens or parts of one:
// "stripe.{type}", "{source}.{type}", "events.{source}-{type}". Any other
// "{" or "}" is an error.
//
// A value's dots separate tokens, so the type "invoice.paid" renders
// "stripe.{type}" as "stripe.invoice.paid", which a consumer can filter
// with "stripe.invoice.*". Within a value, a character a subject cannot
// carry or that would change its meaning is REPLACED by "_": white space
// and other control or non-printable characters, the wildcards "*" and
// ">", and "$" (which would let a value reach a system subject such as
// "$JS.API…"). A value that would make an EMPTY token (an empty value, or
// one with a leading, trailing or doubled dot) is REFUSED, as is a template
// whose own text is not a valid literal subject; both errors wrap
// ErrInvalidSubject.
func RenderSubject(tmpl, source, eventType string) (string, error) {
	var b strings.Builder
	rest := tmpl
	for {
		i := strings.IndexAny(rest, "{}")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		rest = rest[i:]
		var name, value string
		switch {
		case strings.HasPrefix(rest, PlaceholderSource):
			name, value = "source", source
		case strings.HasPrefix(rest, PlaceholderType):
			name, value = "type", eventType
		default:
			return "", fmt.Errorf("%w: template %q: only %s and %s may appear in braces",
				ErrInvalidSubject, tmpl, PlaceholderSource, PlaceholderType)
		}
		if err := writeValue(&b, value); err != nil {
			return "", fmt.Errorf("%w: template %q: %s %q: %w", ErrInvalidSubject, tmpl, name, value, err)
		}
		rest = rest[len(name)+2:]
	}
	subject := b.String()
	if err := ValidateSubject(subject); err != nil {
		return "", fmt.Errorf("template %q: %w", tmpl, err)
	}
	return subject, nil
}

// CheckTemplate checks a subject template without an event: that it holds
// only known placeholders and renders a valid subject. Configuration
// validation calls it, so that a bad template fails at start-up rather than
// at the first message.
func CheckTemplate(tmpl string) error {
	_, err := RenderSubject(tmpl, "source", "type")
	return err
}

// writeValue writes a placeholder's value to b, its invalid characters
// replaced; it refuses a value that would make an empty token.
func writeValue(b *strings.Builder, value string) error {
	for token := range strings.SplitSeq(value, ".") {
		if token == "" {
			return errors.New("an empty token (an empty value, or a leading, trailing or doubled dot)")
		}
	}
	for _, r := range value {
		if r != '.' && !subjectRune(r) || r == '$' {
			r = '_'
		}
		b.WriteRune(r)
	}
	return nil
}

// subjectRune reports whether r may appear in a literal subject's token.
func subjectRune(r rune) bool {
	return r != '*' && r != '>' && r != '.' && r != unicode.ReplacementChar &&
		unicode.IsPrint(r) && !unicode.IsSpace(r)
}

// ValidateSubject reports whether subject is a literal NATS subject that
// Publish accepts: non-empty dot-separated tokens, each non-empty, without
// white space, control characters or the wildcards "*" and ">". The error
// wraps ErrInvalidSubject.
func ValidateSubject(subject string) error {
	if subject == "" {
		return fmt.Errorf("%w: empty", ErrInvalidSubject)
	}
	for token := range strings.SplitSeq(subject, ".") {
		if token == "" {
			return fmt.Errorf("%w: %q has an empty token", ErrInvalidSubject, subject)
		}
		for _, r := range token {
			if !subjectRune(r) {
				return fmt.Errorf("%w: %q holds %q, which a published subject cannot", ErrInvalidSubject, subject, r)
			}
		}
	}
	return nil
}
