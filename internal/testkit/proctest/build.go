package proctest

import (
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sync"
	"testing"
)

// binary is the outcome of building one package.
type binary struct {
	path string
	err  error
}

var (
	buildMu sync.Mutex
	built   = map[string]binary{} // by package: an import path or an absolute directory
	dirs    []string              // the folders Build made, for RemoveBuilds
)

// RemoveBuilds removes the binaries Build made in this process. dbtest.Main
// calls it when a package's tests end; a TestMain of a package that uses
// Build without dbtest calls it itself.
func RemoveBuilds() {
	buildMu.Lock()
	defer buildMu.Unlock()
	for _, dir := range dirs {
		_ = os.RemoveAll(dir)
	}
	dirs = nil
	built = map[string]binary{}
}

// Build compiles the main packages pkgs once per test process and returns
// the paths of their binaries, in the order of pkgs. A package is an import
// path or a directory relative to the test's package ("." or
// "../../cmd/worker"), as `go build` takes it; its binary is named after its
// last element. Build fails the test when a package does not build.
func Build(tb testing.TB, pkgs ...string) []string {
	tb.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	keys := make([]string, len(pkgs))
	var missing []string
	for i, pkg := range pkgs {
		keys[i] = packageKey(pkg)
		if _, ok := built[keys[i]]; !ok {
			built[keys[i]] = binary{} // marks it missing once
			missing = append(missing, keys[i])
		}
	}
	if len(missing) > 0 {
		buildAll(missing)
	}
	paths := make([]string, len(keys))
	for i, key := range keys {
		b := built[key]
		if b.err != nil {
			tb.Fatalf("proctest: %v", b.err)
		}
		paths[i] = b.path
	}
	return paths
}

// packageKey names pkg the same way from every test package of one process:
// a relative directory becomes absolute.
func packageKey(pkg string) string {
	if !build.IsLocalImport(pkg) {
		return pkg
	}
	abs, err := filepath.Abs(pkg)
	if err != nil {
		return pkg // go build reports it
	}
	return abs
}

// buildAll compiles pkgs, each with its own go command and all at once,
// into a folder of their own, and records the outcome of each. Each binary
// comes from `go run -exec cp PKG DEST`: since Go 1.24 the go command keeps
// the executables go run links in its build cache, so a package already
// linked from the same source, by an earlier test process of this run or
// of an earlier run, is copied from the cache instead of linked again (a
// link of one of the daemons is 2 to 3 CPU-seconds; make test links a dozen
// of them); cp copies it out of the cache, or out of go run's work folder
// before go run deletes it. The binaries carry no DWARF (-ldflags=-w):
// nothing debugs them, leaving it out spares a sixth of each link's CPU,
// and stack traces come from the runtime's own line table, which stays.
func buildAll(pkgs []string) {
	dir, err := os.MkdirTemp("", "proctest-")
	if err != nil {
		for _, pkg := range pkgs {
			built[pkg] = binary{err: err}
		}
		return
	}
	dirs = append(dirs, dir)
	results := make([]binary, len(pkgs))
	var wg sync.WaitGroup
	for i, pkg := range pkgs {
		wg.Go(func() { results[i] = buildOne(pkg, filepath.Join(dir, path.Base(filepath.ToSlash(pkg)))) })
	}
	wg.Wait()
	for i, pkg := range pkgs {
		built[pkg] = results[i]
	}
}

// buildOne links the main package pkg (or takes it from the build cache)
// and copies the binary to bin.
func buildOne(pkg, bin string) binary {
	cmd := exec.Command("go", "run", "-ldflags=-w", "-exec", "cp", pkg, bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return binary{err: fmt.Errorf("go build %s: %w\n%s", pkg, err, out)}
	}
	if _, err := os.Stat(bin); err != nil {
		return binary{err: fmt.Errorf("go build %s: no binary: %w", pkg, err)}
	}
	return binary{path: bin}
}
