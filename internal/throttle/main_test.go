package throttle

import (
	"os"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestMain lets the test binary, re-executed with
// DDISKQOS_WORKLOAD_MAIN=1, be a workload process (the v2 tests' streamer
// and victims, each moved into its cgroup before its first request).
func TestMain(m *testing.M) {
	workload.MaybeRunFromEnv()
	os.Exit(m.Run())
}
