package host

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
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

// TestLatencyCheckOff: with the daemon's latency: off, GatherWith does not
// probe the sensor (on a tree without BTF the probe would fail: no error
// means no probe) and latency.ebpf is ok, saying it is off by
// configuration, not unavailable, and how to turn it on.
func TestLatencyCheckOff(t *testing.T) {
	t.Parallel()
	tr := hosttest.New(t)
	tr.HybridV1(true)
	f := GatherWith(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, nil, GatherOptions{LatencyOff: true})
	if f.Latency == nil || !f.Latency.Off || f.Latency.Err != nil {
		t.Fatalf("latency facts %+v, want off and not probed", f.Latency)
	}
	c := mustFind(t, Evaluate(f), "latency.ebpf")
	if c.Status != StatusOK || !strings.Contains(c.Value, "off by configuration (latency: off)") ||
		!strings.Contains(c.Value, "latency: auto") || strings.Contains(c.Value, "unavailable") {
		t.Errorf("off: %+v", c)
	}
	if on := Gather(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, nil); on.Latency == nil || on.Latency.Off || on.Latency.Why != iolat.WhyNoBTF {
		t.Errorf("without options the sensor is probed (no BTF in the tree): %+v", on.Latency)
	}
}
