// Package buildinfo says which hookinbox a binary is: the version stamped
// into it at build time, or what the Go toolchain recorded when none was.
//
// `make image` stamps the version with the linker:
//
//	go build -ldflags "-X github.com/hookinbox/hookinbox/internal/buildinfo.version=v1.2.3" ./cmd/...
package buildinfo

import (
	"runtime/debug"
)

// version is set with -ldflags -X; empty in a plain `go build`.
var version string

// Version returns the stamped version; failing that, the module version the
// toolchain recorded (`go install …@v1.2.3`), or the VCS revision it built
// from (with "-dirty" for uncommitted changes); failing all, "dev".
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return fromBuildInfo(info)
}

// fromBuildInfo picks a version out of what the toolchain recorded.
func fromBuildInfo(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var revision string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if revision == "" {
		return "dev"
	}
	if len(revision) > 12 {
		revision = revision[:12]
	}
	if dirty {
		revision += "-dirty"
	}
	return revision
}
