//go:build imagetest

package imagetest

import (
	"testing"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestMain drops the databases the tests made when they end.
func TestMain(m *testing.M) {
	dbtest.Main(m)
}
