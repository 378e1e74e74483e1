package proctest

import (
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
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

// buildAll compiles pkgs with one go build into a folder of their own and
// records the outcome of each. The binaries carry no DWARF (-ldflags=-w):
// nothing debugs them, leaving it out spares a sixth of each link's CPU,
// and stack traces come from the runtime's own line table, which stays.
// -trimpath keeps the checkout's folder out of the compiled packages, so
// a clean clone elsewhere finds them in the build cache.
func buildAll(pkgs []string) {
	record := func(err error) {
		for _, pkg := range pkgs {
			built[pkg] = binary{err: err}
		}
	}
	dir, err := os.MkdirTemp("", "proctest-")
	if err != nil {
		record(err)
		return
	}
	dirs = append(dirs, dir)
	args := append([]string{"build", "-trimpath", "-ldflags=-w", "-o", dir + string(filepath.Separator)}, pkgs...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		record(fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out))
		return
	}
	for _, pkg := range pkgs {
		bin := filepath.Join(dir, path.Base(filepath.ToSlash(pkg)))
		if _, err := os.Stat(bin); err != nil {
			built[pkg] = binary{err: fmt.Errorf("go build %s: no binary: %w", pkg, err)}
			continue
		}
		built[pkg] = binary{path: bin}
	}
}
