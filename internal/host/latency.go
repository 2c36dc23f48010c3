package host

import (
	"errors"

	"github.com/ddiskqos/ddiskqos/internal/iolat"
)

// LatencyFacts says whether the I/O latency sensor (eBPF, internal/iolat)
// can run on this host: ProbeLatency loads and attaches it, then takes it
// away again.
type LatencyFacts struct {
	// Off: the daemon's configuration turns the sensor off (latency:
	// off); it was not probed.
	Off bool
	Err error // nil: it ran
	// Why and Fix classify Err (iolat.UnavailableError).
	Why, Fix string
}

// ProbeLatency tries the sensor with the kernel's BTF under r.Sys.
func ProbeLatency(r Roots) *LatencyFacts {
	err := iolat.Probe(iolat.Options{SysRoot: r.Sys})
	if err == nil {
		return &LatencyFacts{}
	}
	lf := &LatencyFacts{Err: err, Why: iolat.WhyError, Fix: "see the error"}
	var ue *iolat.UnavailableError
	if errors.As(err, &ue) {
		lf.Err, lf.Why, lf.Fix = ue.Err, ue.Why, ue.Fix
	}
	return lf
}

// latencyChecks is latency.ebpf: whether each container's I/O latency is
// measured. Without it ddiskqos shapes I/O as well, and shows less.
func latencyChecks(f Facts) []Check {
	l := f.Latency
	if l == nil {
		return nil
	}
	c := Check{ID: "latency.ebpf",
		Why: "each container's I/O latency (p50/p99 per disk, in-flight, per-level histograms: who waits, and who makes them wait) " +
			"is measured by BPF programs on the block layer's tracepoints; without them /v1/workloads, /metrics, status and top show no latency"}
	if l.Off {
		c.Status, c.Value = StatusOK, "off by configuration (latency: off): not probed, no BPF loaded; latency: auto (--latency auto) turns it on"
		return []Check{c}
	}
	if l.Err == nil {
		c.Status, c.Value = StatusOK, "available: tp_btf block_rq_issue, block_rq_requeue, block_rq_complete attach"
		return []Check{c}
	}
	c.Status, c.Value, c.Fix = StatusWarn, "unavailable ("+l.Why+"): "+l.Err.Error(), l.Fix
	return []Check{c}
}
