package relay_test

import (
	"testing"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestMain drops the package's template databases when its tests end.
func TestMain(m *testing.M) {
	dbtest.Main(m)
}
