// Package secret holds the types of the settings that must never be shown:
// String for a secret value (a signing secret, a password, a token) and URL
// for a URL or connection string that may carry a password. Both print a
// redaction wherever they are printed (fmt's verbs, JSON, YAML, slog, zap)
// and give their value only to Reveal. It imports nothing of hookinbox, so
// every package's Config may use it.
package secret
