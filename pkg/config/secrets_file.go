package config

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

// ErrNoSecrets is SourceWithSecretsFile's error for a secrets_file that
// holds no secret (empty, or only blank and # lines): more likely a file
// caught half-written than a wish to turn verification off.
var ErrNoSecrets = errors.New("the file holds no secret")

// readSecretsFiles appends each source's secrets_file to its secrets, and
// remembers how many it appended (see SourceWithSecretsFile).
func (c *Config) readSecretsFiles(p *problems) {
	keys := c.sourceKeys()
	for i := range c.Sources {
		source := &c.Sources[i]
		if source.SecretsFile == "" {
			continue
		}
		content, err := os.ReadFile(source.SecretsFile)
		if err != nil {
			p.add(keys[i]+".secrets_file", err) // *fs.PathError names the file, never its content.
			continue
		}
		secrets := ParseSecrets(content)
		for _, s := range secrets {
			source.Secrets = append(source.Secrets, secret.String(s))
		}
		if c.fileSecrets == nil {
			c.fileSecrets = make([]int, len(c.Sources))
		}
		c.fileSecrets[i] = len(secrets)
	}
}

// ParseSecrets returns the secrets in the content of a secrets_file: one a
// line, trimmed, skipping blank lines and lines starting with #.
func ParseSecrets(content []byte) []string {
	var secrets []string
	for line := range strings.Lines(string(content)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		secrets = append(secrets, line)
	}
	return secrets
}

// SourceWithSecretsFile returns a copy of c.Sources[i] whose secrets are
// the ones its secrets key lists followed by those in content, a new
// version of its secrets_file, in place of those Load read from the file.
// The copy's verifier can be built: an error means content holds no secret
// (ErrNoSecrets) or one the provider refuses, and never carries a secret.
func (c *Config) SourceWithSecretsFile(i int, content []byte) (*SourceConfig, error) {
	if i < 0 || i >= len(c.Sources) {
		return nil, fmt.Errorf("no source %d", i)
	}
	src := c.Sources[i]
	fromFile := 0
	if i < len(c.fileSecrets) {
		fromFile = c.fileSecrets[i]
	}
	fresh := ParseSecrets(content)
	if len(fresh) == 0 {
		return nil, ErrNoSecrets
	}
	secrets := slices.Clone(src.Secrets[:max(len(src.Secrets)-fromFile, 0)])
	for _, s := range fresh {
		secrets = append(secrets, secret.String(s))
	}
	src.Secrets = secrets
	if _, err := provider.New(src.Provider, src.ProviderConfig()); err != nil {
		return nil, errors.New(src.scrub(err.Error()))
	}
	return &src, nil
}
