package config

import (
	"errors"
	"fmt"
	"strings"
)

// problem is one thing wrong with the configuration, under the key it is
// about: "receiver.ack_timeout", "sources[stripe].secrets[0]", or "" for
// the configuration as a whole. Load and Validate report every problem at
// once, each on its own line.
type problem struct {
	key string
	err error
	// shape marks a problem with the file's shape (an unknown key), which
	// every command reports, whatever its Needs.
	shape bool
	// needKey, when set, is the key Needs judges the problem by instead of
	// key: a source's verifier that cannot be built is its credentials'
	// problem (sources[stripe].secrets), which only the receiver needs.
	needKey string
}

// judgedBy is the key Needs judges p by.
func (p *problem) judgedBy() string {
	if p.needKey != "" {
		return p.needKey
	}
	return p.key
}

func (p *problem) Error() string {
	if p.key == "" {
		return p.err.Error()
	}
	return p.key + ": " + p.err.Error()
}

func (p *problem) Unwrap() error { return p.err }

// problems collects problems in the order they are found.
type problems []*problem

// add records err under key.
func (p *problems) add(key string, err error) {
	*p = append(*p, &problem{key: key, err: err})
}

// addf records a formatted message under key.
func (p *problems) addf(key, format string, args ...any) {
	p.add(key, fmt.Errorf(format, args...))
}

// join returns the problems as one error, nil if there are none.
func (p problems) join() error {
	errs := make([]error, len(p))
	for i, pr := range p {
		errs[i] = pr
	}
	return errors.Join(errs...)
}

// within reports whether key is section or one of its keys: within
// ("sources[stripe].secrets[0]", "sources") is true.
func within(key, section string) bool {
	rest, ok := strings.CutPrefix(key, section)
	return ok && (rest == "" || rest[0] == '.' || rest[0] == '[')
}

// sourceKeys returns the key each source is reported under: sources[NAME]
// when its name is valid and no other source has it, else sources[INDEX].
func sourceKeys(names []string) []string {
	count := make(map[string]int, len(names))
	for _, name := range names {
		count[name]++
	}
	keys := make([]string, len(names))
	for i, name := range names {
		if sourceNameRE.MatchString(name) && count[name] == 1 {
			keys[i] = "sources[" + name + "]"
		} else {
			keys[i] = fmt.Sprintf("sources[%d]", i)
		}
	}
	return keys
}

// sourceKeys returns the key each of c.Sources is reported under.
func (c *Config) sourceKeys() []string {
	names := make([]string, len(c.Sources))
	for i := range c.Sources {
		names[i] = c.Sources[i].Name
	}
	return sourceKeys(names)
}
