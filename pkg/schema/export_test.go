package schema

import "time"

// Migration is migration, for this package's external tests.
type Migration = migration

// Migrations is migrations, for this package's external tests.
func (s *Set) Migrations() ([]Migration, error) { return s.migrations() }

// Latest is latest, for this package's external tests.
func (s *Set) Latest() (int, error) { return s.latest() }

// WithLockRetries returns a copy of c that tries a migration attempts times,
// the first retry after initial.
func (c MigrateConfig) WithLockRetries(attempts int, initial time.Duration) *MigrateConfig {
	c.lockAttempts, c.lockRetryInitial = attempts, initial
	return &c
}
