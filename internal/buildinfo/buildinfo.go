// Package buildinfo says which build of ddiskqos is running: the module
// version, the VCS revision and its time, whether the tree had local
// changes, and the Go toolchain, as the Go linker records them in every
// binary built from a checkout (runtime/debug.ReadBuildInfo). No -ldflags
// are needed; a release build may still set the version:
//
//	go build -ldflags "-X github.com/ddiskqos/ddiskqos/internal/buildinfo.version=v1.2.0" ./cmd/ddiskqos
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// version, when set with -ldflags -X, replaces the module version.
var version string

// Info is one binary's build.
type Info struct {
	// Version is the -X override or the main module's version: a tag
	// ("v1.2.0"), a pseudo-version of the commit built
	// ("v0.0.0-20261125204313-9e31a66abcde+dirty"), or "(devel)" when the
	// toolchain knew none (go run, go test, -buildvcs=false).
	Version string
	// Revision is the VCS commit (vcs.revision), "" when unknown.
	Revision string
	// Time is the commit's time (vcs.time), zero when unknown.
	Time time.Time
	// Modified says the working tree had uncommitted changes (vcs.modified).
	Modified bool
	// GoVersion is the toolchain that built the binary ("go1.26.8").
	GoVersion string
	// Platform is GOOS/GOARCH of the binary.
	Platform string
}

// Read returns the running binary's build.
func Read() Info {
	bi, _ := debug.ReadBuildInfo() // nil outside module mode: Parse copes
	return Parse(bi, version)
}

// Parse turns the linker's record into an Info; override, when not
// empty, is the version. bi may be nil (a binary without build
// information): every field is then unknown but GoVersion and Platform,
// which the runtime knows.
func Parse(bi *debug.BuildInfo, override string) Info {
	i := Info{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		if bi.Main.Version != "" {
			i.Version = bi.Main.Version
		}
		if bi.GoVersion != "" {
			i.GoVersion = bi.GoVersion
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.time":
				i.Time, _ = time.Parse(time.RFC3339, s.Value) // unparsable: unknown
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if override != "" {
		i.Version = override
	}
	return i
}

// RevisionLabel is the revision as one word: the commit, "-modified"
// appended for a tree with local changes (as prometheus/common/version
// does), "unknown" without VCS information.
func (i Info) RevisionLabel() string {
	switch {
	case i.Revision == "":
		return "unknown"
	case i.Modified:
		return i.Revision + "-modified"
	}
	return i.Revision
}

// String is what "ddiskqos version" prints:
//
//	ddiskqos v0.0.0-20261125204313-9e31a66abcde+dirty
//	revision:    9e31a66abcde0123456789abcdef0123456789ab (modified)
//	commit time: 2026-11-25T20:43:13Z
//	go:          go1.26.8 linux/amd64
func (i Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ddiskqos %s\n", i.Version)
	switch {
	case i.Revision == "":
		b.WriteString("revision:    unknown (no VCS information: go run, go test, -buildvcs=false)\n")
	case i.Modified:
		fmt.Fprintf(&b, "revision:    %s (modified: uncommitted changes)\n", i.Revision)
	default:
		fmt.Fprintf(&b, "revision:    %s\n", i.Revision)
	}
	if !i.Time.IsZero() {
		fmt.Fprintf(&b, "commit time: %s\n", i.Time.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(&b, "go:          %s %s\n", i.GoVersion, i.Platform)
	return b.String()
}
