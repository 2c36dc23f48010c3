package host

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestNewFDLimitError: the error counts what the workloads need, keeps
// the soft limit given, reads the hard one, and names the figures.
func TestNewFDLimitError(t *testing.T) {
	t.Parallel()
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	e := NewFDLimitError(1000, 512)
	if e.Workloads != 1000 || e.Need != FDBudget(1000) || e.Soft != 512 || e.Hard != rl.Max {
		t.Fatalf("%+v, want 1000 workloads needing %d, soft 512, hard %d", e, FDBudget(1000), rl.Max)
	}
	if msg := e.Error(); !strings.Contains(msg, "1000 workloads need 1256 descriptors") || !strings.Contains(msg, "soft 512") {
		t.Errorf("message %q", msg)
	}
}
