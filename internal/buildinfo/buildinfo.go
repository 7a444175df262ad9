// Package buildinfo says which build of corral is running: its version,
// the commit it was built from and the Go toolchain that built it. A
// release build sets the version (and the commit) with -ldflags (make
// release); any other build reads them from the build information the Go
// toolchain embeds (the module version of `go install …@v0.3.0`, the VCS
// revision of a build inside a git checkout), else "(devel)". All
// functions may be called concurrently.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// Set at release by the linker, e.g.
//
//	-ldflags '-X github.com/corral-rt/corral/internal/buildinfo.version=0.3.0
//	          -X github.com/corral-rt/corral/internal/buildinfo.commit=<sha>'
//
// Empty otherwise.
var version, commit string

// Info is one build's identity.
type Info struct {
	// A semantic version without the leading "v" ("0.3.0"), or "(devel)".
	Version string
	// The full commit hash with "-dirty" appended when the work tree had
	// changes, or "unknown" (a build outside a git checkout).
	Commit string
	// The toolchain's version, e.g. "go1.26.7".
	GoVersion string
}

// String is the one line `corral version` prints.
func (i Info) String() string {
	return fmt.Sprintf("corral %s (commit %s, %s)", i.Version, i.Commit, i.GoVersion)
}

// Get returns this build's Info.
var Get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(version, commit, bi)
})

// Version is Get().Version: what RoomService.Info and the edge's link
// headers report.
func Version() string { return Get().Version }

// resolve prefers what the linker set, then the embedded build
// information.
func resolve(version, commit string, bi *debug.BuildInfo) Info {
	i := Info{Version: version, Commit: commit, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		// "(devel)" is what the toolchain says of a plain `go build`;
		// "v0.3.0" of `go install module@v0.3.0`.
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		if i.Commit == "" {
			var rev string
			var dirty bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					dirty = s.Value == "true"
				}
			}
			if rev != "" && dirty {
				rev += "-dirty"
			}
			i.Commit = rev
		}
	}
	if i.Version == "" {
		i.Version = "(devel)"
	} else if i.Version[0] == 'v' {
		i.Version = i.Version[1:]
	}
	if i.Commit == "" {
		i.Commit = "unknown"
	}
	return i
}
