package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	const rev = "9e31a66abcde0123456789abcdef0123456789ab"
	platform := runtime.GOOS + "/" + runtime.GOARCH
	for _, tc := range []struct {
		name     string
		bi       *debug.BuildInfo
		override string
		want     Info
		label    string
	}{
		{"no build info", nil, "", Info{Version: "(devel)", GoVersion: runtime.Version(), Platform: platform}, "unknown"},
		{"go test: no vcs", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "",
			Info{Version: "(devel)", GoVersion: "go1.26.8", Platform: platform}, "unknown"},
		{"clean checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261125204313-9e31a66abcde"},
			Settings: vcs("-trimpath", "true", "vcs", "git", "vcs.revision", rev, "vcs.time", "2026-11-25T20:43:13Z", "vcs.modified", "false")}, "",
			Info{Version: "v0.0.0-20261125204313-9e31a66abcde", Revision: rev, Time: time.Date(2026, 11, 25, 20, 43, 13, 0, time.UTC),
				GoVersion: "go1.26.8", Platform: platform}, rev},
		{"modified tree", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261125204313-9e31a66abcde+dirty"},
			Settings: vcs("vcs.revision", rev, "vcs.modified", "true", "vcs.time", "not a time")}, "",
			Info{Version: "v0.0.0-20261125204313-9e31a66abcde+dirty", Revision: rev, Modified: true, GoVersion: "go1.26.8", Platform: platform},
			rev + "-modified"},
		{"release: -X override", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", rev)}, "v1.2.0",
			Info{Version: "v1.2.0", Revision: rev, GoVersion: "go1.26.8", Platform: platform}, rev},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := Parse(tc.bi, tc.override)
			if got != tc.want {
				t.Errorf("Parse = %+v\nwant    %+v", got, tc.want)
			}
			if l := got.RevisionLabel(); l != tc.label {
				t.Errorf("RevisionLabel = %q, want %q", l, tc.label)
			}
		})
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	const rev = "9e31a66abcde0123456789abcdef0123456789ab"
	at := time.Date(2026, 11, 25, 21, 43, 13, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct {
		in   Info
		want string
	}{
		{Info{Version: "v0.0.0-20261125204313-9e31a66abcde+dirty", Revision: rev, Time: at, Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"ddiskqos v0.0.0-20261125204313-9e31a66abcde+dirty\n" +
				"revision:    " + rev + " (modified: uncommitted changes)\n" +
				"commit time: 2026-11-25T20:43:13Z\n" +
				"go:          go1.26.8 linux/amd64\n"},
		{Info{Version: "v1.2.0", Revision: rev, Time: at, GoVersion: "go1.26.8", Platform: "linux/arm64"},
			"ddiskqos v1.2.0\nrevision:    " + rev + "\ncommit time: 2026-11-25T20:43:13Z\ngo:          go1.26.8 linux/arm64\n"},
		{Info{Version: "(devel)", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"ddiskqos (devel)\nrevision:    unknown (no VCS information: go run, go test, -buildvcs=false)\ngo:          go1.26.8 linux/amd64\n"},
	} {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("String of %+v:\n%s\nwant\n%s", tc.in, got, tc.want)
		}
	}
}
