package faults_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// table collects every scenario's row; TestMain prints it.
var table faults.Table

// TestMain runs the scenarios, prints their table, drops the package's
// databases and exits non-zero when a scenario failed.
func TestMain(m *testing.M) {
	code := dbtest.Run(m)
	if table.Len() > 0 {
		fmt.Println()
		table.Print(os.Stdout)
		if broken := table.Broken(); len(broken) > 0 {
			fmt.Printf("\nguarantee broken in: %v\n", broken)
			code = 1
		}
	}
	os.Exit(code)
}

// record adds a row named scenario to the table; it is marked OK when the
// test ends without a failure.
func record(t *testing.T, scenario string) *faults.Row {
	t.Helper()
	row := &faults.Row{Scenario: scenario}
	t.Cleanup(func() {
		row.OK = !t.Failed()
		table.Add(row)
	})
	return row
}
