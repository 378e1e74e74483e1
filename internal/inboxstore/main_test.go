package inboxstore_test

import (
	"testing"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestMain drops the package's template databases when its tests end, and
// fails the package when a test leaves a goroutine running.
func TestMain(m *testing.M) {
	dbtest.Main(m)
}
