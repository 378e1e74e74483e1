package schema

// Migration is migration, for this package's external tests.
type Migration = migration

// Migrations is migrations, for this package's external tests.
func (s *Set) Migrations() ([]Migration, error) { return s.migrations() }

// Latest is latest, for this package's external tests.
func (s *Set) Latest() (int, error) { return s.latest() }
