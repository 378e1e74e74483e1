package metrics

import "github.com/prometheus/client_golang/prometheus"

// The results of a secrets file's reload, the values of the result label of
// hookinbox_secrets_reload_total.
const (
	// ReloadApplied is a changed file whose secrets replaced the old ones.
	ReloadApplied = "applied"
	// ReloadRefused is a changed file refused (no secret, or one the
	// provider refuses): the old secrets stay.
	ReloadRefused = "refused"
	// ReloadUnreadable is a file that could not be read: the old secrets
	// stay.
	ReloadUnreadable = "unreadable"
)

// Secrets counts the reloads of the sources' secrets files.
type Secrets struct {
	reloads *prometheus.CounterVec
}

// NewSecrets registers the secrets files' metrics on reg.
func NewSecrets(reg prometheus.Registerer) *Secrets {
	m := &Secrets{reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "secrets_reload_total",
		Help: "Changes of a source's secrets_file seen by the receiver, by source and result: applied, refused (no secret, or one the provider refuses) or unreadable; the old secrets stay unless applied.",
	}, []string{"source", "result"})}
	reg.MustRegister(m.reloads)
	return m
}

// Reload counts a reload of source's secrets file with result, one of the
// Reload constants.
func (m *Secrets) Reload(source, result string) {
	if m == nil {
		return
	}
	m.reloads.WithLabelValues(source, result).Inc()
}
