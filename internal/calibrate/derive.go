// Package calibrate measures what a block device can do and turns the
// figures into iocost's io.cost.model and io.cost.qos for it, keeping the
// values it replaced so they can be put back.
//
// iocost prices every request from its model and runs the device at a
// virtual rate (vrate) of that model; it shapes I/O by weight only while
// the device is saturated in its own eyes. A model above what the device
// really does (the kernel's defaults for a whole device class) leaves the
// device itself as the bottleneck, where every cgroup queues alike and
// weights barely show; a model at the device's capacity with latency
// targets lets iocost find the saturation point and share it by weight.
//
// The model is derived as the kernel's tools/cgroup/iocost_coef_gen.py
// does: bytes/s from sequential reads and writes of large blocks, and the
// 4 KiB sequential and random IOPS at a deep queue. The QoS part is this
// package's heuristic, in the spirit of resctl-bench's: latency targets
// between the device's unloaded and saturated 4 KiB latency (3x the
// unloaded p90, at most the saturated p99), vrate bounded
// to [MinVrate, MaxVrate] percent of the model.
package calibrate

import (
	"fmt"
	"math"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// Pattern names one measurement.
type Pattern string

const (
	SeqRead        Pattern = "seqread"          // large blocks: rbps
	SeqRead4k      Pattern = "seqread-4k"       // 4 KiB at SeqIOPSDepth: rseqiops
	RandRead4k     Pattern = "randread-4k"      // 4 KiB at RandIOPSDepth: rrandiops, saturated read latency
	SeqWrite       Pattern = "seqwrite"         // large blocks: wbps
	SeqWrite4k     Pattern = "seqwrite-4k"      // wseqiops
	RandWrite4k    Pattern = "randwrite-4k"     // wrandiops, saturated write latency
	RandRead4kQD1  Pattern = "randread-4k-qd1"  // unloaded read latency
	RandWrite4kQD1 Pattern = "randwrite-4k-qd1" // unloaded write latency
)

// Plan is how long and how hard each pattern runs.
type Plan struct {
	Duration   time.Duration // per pattern
	SeqBlock   int64         // block size of the bytes/s patterns
	SeqDepth   int           // requests in flight for the bytes/s patterns
	IOPSDepth  int           // requests in flight for the 4 KiB IOPS patterns
	Span       int64         // region used from the device's start; 0: all of it
	SkipWrites bool          // measure reads only (the write coefficients then copy the read ones)
}

// DefaultPlan is the CLI's default: 10 s per pattern, 80 s in all.
// iocost_coef_gen.py moves 128 MiB per request at depth 1; 4 MiB at depth
// 8 keeps as much in flight with a buffer a small host can spare.
func DefaultPlan() Plan {
	return Plan{Duration: 10 * time.Second, SeqBlock: 4 << 20, SeqDepth: 8, IOPSDepth: 64}
}

// Validate names every bad field.
func (p Plan) Validate() error {
	switch {
	case p.Duration < 100*time.Millisecond:
		return fmt.Errorf("duration %v: want at least 100ms per pattern", p.Duration)
	case p.SeqBlock < 4096 || p.SeqBlock%4096 != 0 || p.SeqBlock > workload.MaxBlockSize:
		return fmt.Errorf("sequential block size %d: want a multiple of 4096 up to %d", p.SeqBlock, workload.MaxBlockSize)
	case p.SeqDepth < 1 || p.SeqDepth > workload.MaxIODepth:
		return fmt.Errorf("sequential depth %d: want 1..%d", p.SeqDepth, workload.MaxIODepth)
	case p.IOPSDepth < 1 || p.IOPSDepth > workload.MaxIODepth:
		return fmt.Errorf("IOPS depth %d: want 1..%d", p.IOPSDepth, workload.MaxIODepth)
	case p.Span < 0 || p.Span%4096 != 0:
		return fmt.Errorf("span %d: want a multiple of 4096", p.Span)
	}
	return nil
}

// Specs are the workload jobs of the plan on path, in the order they run.
func (p Plan) Specs(path string) []NamedSpec {
	base := workload.Spec{Path: path, Direct: true, Duration: p.Duration, Span: p.Span}
	spec := func(op workload.Op, bs int64, depth int) workload.Spec {
		s := base
		s.Op, s.BlockSize, s.IODepth = op, bs, depth
		s.Loop = op == workload.OpRead || op == workload.OpWrite
		return s
	}
	out := []NamedSpec{
		{SeqRead, spec(workload.OpRead, p.SeqBlock, p.SeqDepth)},
		{SeqRead4k, spec(workload.OpRead, 4096, p.IOPSDepth)},
		{RandRead4k, spec(workload.OpRandRead, 4096, p.IOPSDepth)},
		{RandRead4kQD1, spec(workload.OpRandRead, 4096, 1)},
	}
	if p.SkipWrites {
		return out
	}
	return append(out,
		NamedSpec{SeqWrite, spec(workload.OpWrite, p.SeqBlock, p.SeqDepth)},
		NamedSpec{SeqWrite4k, spec(workload.OpWrite, 4096, p.IOPSDepth)},
		NamedSpec{RandWrite4k, spec(workload.OpRandWrite, 4096, p.IOPSDepth)},
		NamedSpec{RandWrite4kQD1, spec(workload.OpRandWrite, 4096, 1)},
	)
}

// NamedSpec is one pattern's job.
type NamedSpec struct {
	Pattern Pattern
	Spec    workload.Spec
}

// Measurement is what one pattern did.
type Measurement struct {
	Pattern     Pattern          `json:"pattern"`
	BlockSize   int64            `json:"block_size"`
	IODepth     int              `json:"iodepth"`
	BytesPerSec float64          `json:"bytes_per_sec"`
	IOPS        float64          `json:"iops"`
	Latency     workload.Latency `json:"latency_us"`
}

// FromResult turns a workload result into a Measurement.
func FromResult(p Pattern, r workload.Result) Measurement {
	m := Measurement{Pattern: p, BlockSize: r.BlockSize, IODepth: r.IODepth, BytesPerSec: r.BytesPerSec, Latency: r.Latency}
	if s := r.Elapsed.Seconds(); s > 0 {
		m.IOPS = float64(r.Ops) / s
	}
	return m
}

// The vrate bounds, in percent of the model. The model is the device's
// measured capacity, so iocost need never run it faster (MaxVrate); the
// latency targets push vrate down while the device queues, never below
// MinVrate, so a target that cannot be met (a noisy device) costs at most
// half the device.
const (
	MinVrate = 50.0
	MaxVrate = 100.0
	// Pct is the latency percentile the targets bound.
	Pct = 95.0
	// LatencyFactor times the unloaded p90 is the latency target, unless
	// that is above the saturated p99 (then the saturated p99 is). The
	// unloaded p90, not p99: one slow request in a short run (a busy host,
	// an emulated disk) must not set a target the queue never misses.
	LatencyFactor = 3
)

// Derive computes the model and QoS for dev from the measurements (pure).
// It fails naming the pattern that is missing or moved nothing.
func Derive(dev cgroupfs.Dev, ms []Measurement) (cgroupfs.CostModel, cgroupfs.CostQoS, error) {
	get := func(p Pattern) (Measurement, error) {
		for _, m := range ms {
			if m.Pattern == p {
				if m.BytesPerSec <= 0 || m.IOPS <= 0 {
					return m, fmt.Errorf("pattern %s moved nothing: cannot derive a model from it", p)
				}
				return m, nil
			}
		}
		return Measurement{}, fmt.Errorf("pattern %s was not measured", p)
	}
	var firstErr error
	must := func(p Pattern) Measurement {
		m, err := get(p)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		return m
	}
	iops4k := func(m Measurement) uint64 { return uint64(math.Round(m.BytesPerSec / 4096)) }
	model := cgroupfs.CostModel{Dev: dev, Ctrl: "user", Model: "linear"}
	model.RBps = uint64(math.Round(must(SeqRead).BytesPerSec))
	model.RSeqIOPS = iops4k(must(SeqRead4k))
	rsat := must(RandRead4k)
	model.RRandIOPS = iops4k(rsat)
	ridle := must(RandRead4kQD1)
	wsat, widle := rsat, ridle
	if hasPattern(ms, SeqWrite) {
		model.WBps = uint64(math.Round(must(SeqWrite).BytesPerSec))
		model.WSeqIOPS = iops4k(must(SeqWrite4k))
		wsat = must(RandWrite4k)
		model.WRandIOPS = iops4k(wsat)
		widle = must(RandWrite4kQD1)
	} else {
		model.WBps, model.WSeqIOPS, model.WRandIOPS = model.RBps, model.RSeqIOPS, model.RRandIOPS
	}
	if firstErr != nil {
		return cgroupfs.CostModel{}, cgroupfs.CostQoS{}, firstErr
	}
	for _, v := range []uint64{model.RBps, model.RSeqIOPS, model.RRandIOPS, model.WBps, model.WSeqIOPS, model.WRandIOPS} {
		if v == 0 {
			return cgroupfs.CostModel{}, cgroupfs.CostQoS{}, fmt.Errorf("model %q has a zero coefficient: the device moved less than 4 KiB/s", model.Line())
		}
	}
	qos := cgroupfs.CostQoS{
		Dev: dev, Enable: true, Ctrl: "user",
		RPct: Pct, RLat: target(ridle.Latency, rsat.Latency),
		WPct: Pct, WLat: target(widle.Latency, wsat.Latency),
		Min: MinVrate, Max: MaxVrate,
	}
	return model, qos, nil
}

func hasPattern(ms []Measurement, p Pattern) bool {
	for _, m := range ms {
		if m.Pattern == p {
			return true
		}
	}
	return false
}

// target is a latency target in microseconds: LatencyFactor times the
// unloaded p90, at most the saturated p99, at least 1.
func target(idle, sat workload.Latency) uint64 {
	t := LatencyFactor * idle.P90
	if sat.P99 > 0 && t > sat.P99 {
		t = sat.P99
	}
	return uint64(max(1, math.Round(t)))
}
