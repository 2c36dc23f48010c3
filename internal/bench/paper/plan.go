// Package paper is `ddiskqos bench paper`: the dDiskQoS paper's experiments
// (its Tables 3 and 5) in real Docker containers on a loop-device volume,
// with ddiskqos side by side with what an operator has today — the
// device's default scheduler, BFQ with equal weights, BFQ with weights set
// by hand — interleaved trial by trial so the shared disk's moods hit all
// of them alike.
//
// One trial runs every configuration once, in a fixed order. In each
// configuration a bulk container streams a large file with O_DIRECT
// (the paper's "extremely large file read" as background traffic), then:
//
//   - Table 3: a new container per read of each small file, cold (its
//     pages dropped first), one after the other;
//   - interactive: a container doing 4k random reads at a low rate, its
//     per-request latency in an HDR histogram;
//   - quiet: nobody but the bulk container, to see whether it gets the
//     disk back (work conservation);
//   - Table 5: a fresh bulk container and readers of 2, 4, 64, 16 and 4 MiB
//     released 2, 2, 2, 3 and 4 s after it started (the second reader
//     starting at 2 s is 4 MB in the paper's Table 4 and 64 MB in its
//     Table 5: both run).
//
// The baselines "idle" (the small readers with no bulk container) and
// "solo" (the bulk container alone) run in every trial too.
package paper

import (
	"fmt"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// Mode is how much to run.
type Mode string

const (
	ModeQuick   Mode = "quick"
	ModeDefault Mode = "default"
	ModeFull    Mode = "full"
)

const (
	kib = 1 << 10
	mib = 1 << 20
)

// Plan is what one run does; PlanFor gives each mode's.
type Plan struct {
	Mode   Mode     `json:"mode"`
	Trials int      `json:"trials"`
	Reps   int      `json:"reps"` // reads of each Table 3 size per configuration and trial
	Sizes  []int64  `json:"table3_sizes"`
	Table5 []Reader `json:"table5_readers"`
	// BulkFile is the size of the file the bulk container streams.
	BulkFile int64 `json:"bulk_file_bytes"`
	// Gate is how long every foreground container waits, started and
	// ready, before it is released to read: the same in every
	// configuration. It stands for container and application start-up,
	// and is when "static" writes the container's weight.
	Gate time.Duration `json:"gate_ns"`
	// Warm is how long the bulk container streams before the first read.
	Warm time.Duration `json:"warm_ns"`
	// Interactive: 4k random reads at InteractiveRate bytes/s for this long.
	Interactive     time.Duration `json:"interactive_ns"`
	InteractiveRate int64         `json:"interactive_rate"`
	// QuietSettle then QuietMeasure: the bulk container alone after the
	// readers, measured over the second part.
	QuietSettle  time.Duration `json:"quiet_settle_ns"`
	QuietMeasure time.Duration `json:"quiet_measure_ns"`
	// Solo: the bulk container alone (default scheduler, no QoS), measured
	// after Warm.
	Solo    time.Duration `json:"solo_ns"`
	Configs []string      `json:"configs"`
}

// Reader is one of Table 5's readers: Size bytes, released At after the
// bulk container started.
type Reader struct {
	Size int64         `json:"size"`
	At   time.Duration `json:"at_ns"`
}

// Label is "2MiB@2s".
func (r Reader) Label() string { return fmt.Sprintf("%s@%s", sizeLabel(r.Size), r.At) }

func sizeLabel(n int64) string {
	if n%mib == 0 {
		return fmt.Sprintf("%dMiB", n/mib)
	}
	return fmt.Sprintf("%dB", n)
}

// The configurations, in the order each trial runs them.
const (
	CfgIdle     = "idle"
	CfgSolo     = "solo"
	CfgOriginal = "original"
	CfgBFQ      = "bfq"
	CfgStatic   = "static"
	CfgDdiskqos = "ddiskqos"
	CfgPaper    = "paper"
)

// Compared are the configurations with a bulk container and small readers.
var Compared = []string{CfgOriginal, CfgBFQ, CfgStatic, CfgDdiskqos, CfgPaper}

// PlanFor returns the plan of a mode; trials > 0 overrides its trials.
func PlanFor(m Mode, trials int) (Plan, error) {
	p := Plan{Mode: m, Gate: time.Second, Warm: 2 * time.Second, InteractiveRate: 400 * kib,
		Table5: []Reader{{2 * mib, 2 * time.Second}, {4 * mib, 2 * time.Second}, {64 * mib, 2 * time.Second},
			{16 * mib, 3 * time.Second}, {4 * mib, 4 * time.Second}},
		Configs: append([]string{CfgIdle, CfgSolo}, Compared...)}
	switch m {
	case ModeQuick:
		p.Trials, p.Reps, p.Sizes, p.BulkFile = 1, 1, []int64{1 * mib, 10 * mib, 100 * mib}, 512*mib
		p.Interactive, p.QuietSettle, p.QuietMeasure, p.Solo = 2*time.Second, 2500*time.Millisecond, 1500*time.Millisecond, 2*time.Second
	case ModeDefault:
		p.Trials, p.Reps, p.Sizes, p.BulkFile = 3, 3, []int64{1 * mib, 10 * mib, 100 * mib}, 1024*mib
		p.Interactive, p.QuietSettle, p.QuietMeasure, p.Solo = 5*time.Second, 3*time.Second, 2*time.Second, 3*time.Second
	case ModeFull:
		p.Trials, p.Reps, p.Sizes, p.BulkFile = 5, 5, []int64{1 * mib, 10 * mib, 100 * mib, 1000 * mib}, 2048*mib
		p.Interactive, p.QuietSettle, p.QuietMeasure, p.Solo = 10*time.Second, 3*time.Second, 3*time.Second, 4*time.Second
	default:
		return Plan{}, fmt.Errorf("mode %q: want quick, default or full", m)
	}
	if trials > 0 {
		p.Trials = trials
	}
	return p, nil
}

// FilesBytes is the total size of the files the plan reads.
func (p Plan) FilesBytes() int64 {
	n := p.BulkFile
	for _, s := range p.Sizes {
		n += s
	}
	for _, r := range p.Table5 {
		n += r.Size
	}
	return n
}

// VolumeSize is the volume a plan needs: its files, a quarter more for
// ext4's own blocks, and 128 MiB.
func (p Plan) VolumeSize() int64 {
	n := p.FilesBytes()
	return n + n/4 + 128*mib
}

// PaperPolicy is the paper's Table 1 as written: thresholds in MB (10^6
// bytes; ddiskqos uses MiB). The paper gives no weight but 1000 for a new
// container and no boost time; ddiskqos's are kept.
func PaperPolicy() policy.Config {
	pc := policy.DefaultConfig()
	pc.Allowances = [policy.NumLevels]uint64{2e6, 8e6, 32e6, 128e6}
	return pc
}
