package app

import (
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// TestLatencyOptionsOff: latency: off gives the daemon no sensor to open
// (so no BPF is loaded) and tells it the stage is off; auto, the default,
// gives it the eBPF sensor.
func TestLatencyOptionsOff(t *testing.T) {
	t.Parallel()
	roots := host.Roots{Sys: "/nonexistent/sys", Proc: "/nonexistent/proc"}
	off := latencyOptions(config.LatencyOff, roots)
	if !off.Off || off.Open != nil {
		t.Errorf("latency off: Off %v, Open set %v; want off and nothing to open", off.Off, off.Open != nil)
	}
	auto := latencyOptions(config.Default().Latency, roots)
	if auto.Off || auto.Open == nil || auto.SysRoot != roots.Sys {
		t.Errorf("latency auto (the default): Off %v, Open set %v, SysRoot %q; want the sensor", auto.Off, auto.Open != nil, auto.SysRoot)
	}
}
