package host

import (
	"errors"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// TestLatencyCheck: latency.ebpf is ok when the sensor ran, a warning with
// the cause and its fix when it could not, and absent when not probed; a
// host whose sysfs has no BTF is "no BTF" with a kernel to boot as fix.
func TestLatencyCheck(t *testing.T) {
	t.Parallel()
	if cs := latencyChecks(Facts{}); len(cs) != 0 {
		t.Errorf("not probed: %+v", cs)
	}
	cs := latencyChecks(Facts{Latency: &LatencyFacts{}})
	if len(cs) != 1 || cs[0].ID != "latency.ebpf" || cs[0].Status != StatusOK || cs[0].Fix != "" {
		t.Errorf("available: %+v", cs)
	}
	cs = latencyChecks(Facts{Latency: &LatencyFacts{Err: errors.New("operation not permitted"), Why: iolat.WhyNoPrivilege, Fix: "add CAP_BPF"}})
	if len(cs) != 1 || cs[0].Status != StatusWarn || cs[0].Value != "unavailable (no privilege): operation not permitted" || cs[0].Fix != "add CAP_BPF" {
		t.Errorf("no privilege: %+v", cs)
	}
	lf := ProbeLatency(Roots{Sys: t.TempDir(), Proc: t.TempDir()})
	if lf.Err == nil || lf.Why != iolat.WhyNoBTF || !strings.Contains(lf.Fix, "CONFIG_DEBUG_INFO_BTF") {
		t.Errorf("sysfs without BTF: %+v", lf)
	}
}
