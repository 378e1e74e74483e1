package admin_test

import (
	"testing"

	"github.com/hookinbox/hookinbox/pkg/dbtest"
)

func TestMain(m *testing.M) {
	dbtest.Main(m)
}
