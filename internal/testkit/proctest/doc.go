// Package proctest runs the project's own binaries in tests, as an operator
// would: built from source, started as real processes, stopped with real
// signals.
//
// Build compiles main packages once per test process and returns the
// binaries' paths; every test that asks for a package again gets the same
// binary, and a failed build fails every test that asks for it, with the
// compiler's output. The binaries stay in a folder under os.TempDir, one per
// test process.
//
// Start runs an *exec.Cmd in the background and captures its standard
// output and error together, line by line. The test waits on what the
// process says (WaitLine, woken by each new line, never polling) or on what
// it does elsewhere (WaitUntil, which polls a condition and fails at once
// when the process exits first). Stop, Terminate and Kill end it with
// SIGTERM or SIGKILL and wait for it to exit; whatever the test does not end,
// t.Cleanup kills. When the test fails, its cleanup logs every process's
// output, so no assertion has to carry it.
//
// Run runs a command to completion and returns its exit code and output.
//
// proctest is a test helper: only _test.go files (and proctest itself)
// import it, which the depguard rule in .golangci.yaml enforces.
package proctest
