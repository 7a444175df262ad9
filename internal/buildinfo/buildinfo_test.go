package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		{"no build info", "", "", nil, Info{"(devel)", "unknown", ""}},
		{"plain go build outside git", "", "", &debug.BuildInfo{GoVersion: "go1.26.7", Main: debug.Module{Version: "(devel)"}},
			Info{"(devel)", "unknown", "go1.26.7"}},
		{"go build in a checkout", "", "", &debug.BuildInfo{GoVersion: "go1.26.7", Main: debug.Module{Version: "(devel)"}, Settings: vcs("abc123", "false")},
			Info{"(devel)", "abc123", "go1.26.7"}},
		{"changed work tree", "", "", &debug.BuildInfo{GoVersion: "go1.26.7", Settings: vcs("abc123", "true")},
			Info{"(devel)", "abc123-dirty", "go1.26.7"}},
		{"go install at a tag", "", "", &debug.BuildInfo{GoVersion: "go1.26.7", Main: debug.Module{Version: "v0.3.0"}},
			Info{"0.3.0", "unknown", "go1.26.7"}},
		{"release: the linker's values win", "0.3.1", "def456", &debug.BuildInfo{GoVersion: "go1.26.7", Main: debug.Module{Version: "v0.3.0"}, Settings: vcs("abc123", "true")},
			Info{"0.3.1", "def456", "go1.26.7"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.version, tc.commit, tc.bi)
			if tc.want.GoVersion == "" {
				tc.want.GoVersion = got.GoVersion // runtime.Version()
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{"0.3.0", "abc123", "go1.26.7"}.String()
	if want := "corral 0.3.0 (commit abc123, go1.26.7)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
