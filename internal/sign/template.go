package sign

import (
	"errors"
	"fmt"
	"regexp"
)

// templatePart is one piece of a template: a literal or a placeholder.
type templatePart struct {
	placeholder string // "body", "timestamp", "id", or "" for a literal
	literal     string
}

// templatePlaceholder matches a template placeholder.
var templatePlaceholder = regexp.MustCompile(`\{[A-Za-z_]+\}`)

// Template is what an hmac source signs (hmac.template): literals and the
// placeholders {body}, {timestamp} and {id}. A nil Template signs the raw
// body.
type Template []templatePart

// ParseTemplate splits hmac.template into literals and placeholders; an
// empty template is nil. Its errors name the config key.
func ParseTemplate(template string) (Template, error) {
	if template == "" {
		return nil, nil
	}
	var parts []templatePart
	hasBody := false
	last := 0
	for _, loc := range templatePlaceholder.FindAllStringIndex(template, -1) {
		name := template[loc[0]+1 : loc[1]-1]
		switch name {
		case "body", "timestamp", "id":
		default:
			return nil, fmt.Errorf("hmac.template has an unknown placeholder {%s} (known: {body}, {timestamp}, {id})", name)
		}
		hasBody = hasBody || name == "body"
		if loc[0] > last {
			parts = append(parts, templatePart{literal: template[last:loc[0]]})
		}
		parts = append(parts, templatePart{placeholder: name})
		last = loc[1]
	}
	if !hasBody {
		return nil, errors.New("hmac.template must contain {body}, or the body would not be signed")
	}
	if last < len(template) {
		parts = append(parts, templatePart{literal: template[last:]})
	}
	return parts, nil
}

// Uses reports whether the template has the named placeholder.
func (t Template) Uses(placeholder string) bool {
	for _, part := range t {
		if part.placeholder == placeholder {
			return true
		}
	}
	return false
}

// Signed returns the signed content in parts: the raw body, or the template
// with its placeholders filled in.
func (t Template) Signed(body []byte, timestamp, id string) [][]byte {
	if t == nil {
		return [][]byte{body}
	}
	parts := make([][]byte, len(t))
	for i, part := range t {
		switch part.placeholder {
		case "body":
			parts[i] = body
		case "timestamp":
			parts[i] = []byte(timestamp)
		case "id":
			parts[i] = []byte(id)
		default:
			parts[i] = []byte(part.literal)
		}
	}
	return parts
}
