package metrics

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"

	"github.com/ddiskqos/ddiskqos/internal/buildinfo"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestBuildInfoGolden: the exposition of ddiskqos_build_info for a build
// from a modified tree (testdata/build_info.prom; -update rewrites it),
// lint-clean; registering it twice is an error.
func TestBuildInfoGolden(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	bi := buildinfo.Info{Version: "v0.0.0-20261125204313-9e31a66abcde+dirty", Revision: "9e31a66abcde0123456789abcdef0123456789ab",
		Modified: true, Time: time.Date(2026, 11, 25, 20, 43, 13, 0, time.UTC), GoVersion: "go1.26.8", Platform: "linux/amd64"}
	if err := RegisterBuildInfo(reg, bi); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Golden(t, filepath.Join("testdata", "build_info.prom"), b.String())
	problems, err := testutil.GatherAndLint(reg)
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	if err := RegisterBuildInfo(reg, bi); err == nil {
		t.Error("a second RegisterBuildInfo on the same registry: no error")
	}
}
