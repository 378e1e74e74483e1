package replay_test

import (
	"testing"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m)
}
