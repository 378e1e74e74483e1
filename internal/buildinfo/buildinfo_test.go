package buildinfo

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFromBuildInfo(t *testing.T) {
	t.Parallel()

	settings := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tt := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"ModuleVersionWins", debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}, Settings: settings("vcs.revision", "0123456789abcdef")}, "v1.2.3"},
		{"DevelFallsBackToRevision", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: settings("vcs.revision", "0123456789abcdef", "vcs.modified", "false")}, "0123456789ab"},
		{"DirtyTreeIsMarked", debug.BuildInfo{Settings: settings("vcs.revision", "0123456789abcdef", "vcs.modified", "true")}, "0123456789ab-dirty"},
		{"NothingRecordedIsDev", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tt.want, fromBuildInfo(&tt.info))
		})
	}
}
