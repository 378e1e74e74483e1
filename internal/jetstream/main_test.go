package jetstream

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package when a test leaves a goroutine running: a
// connection not closed, or an in-process server not shut down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
