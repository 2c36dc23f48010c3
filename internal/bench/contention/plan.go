// Package contention is `ddiskqos bench contention`. Its cell scenario
// (Run) first proves that a noisy neighbour makes a small reader slow (no
// QoS against the reader alone), then measures, side by side in one run,
// what BFQ, hand-set BFQ weights, a fixed throttle an operator would set,
// and ddiskqos do about it.
//
// Its host scenario (RunHost, hostplan.go) measures a host as it lives: a
// streamer that runs all along, the daemon up from the start, a web
// service and eight light tenants beside it and the cold reads of new
// containers, against idle, no QoS and static caps on the streamer at
// 2–50 % of its no-QoS throughput: the frontier ddiskqos's point is read
// against. It refuses a host that is not quiet.
//
// The rig is a loop-device ext4 volume (internal/bench/volume) and cgroups
// under a parent of the bench's own, in v1 blkio or cgroup v2, whichever is
// the host's I/O hierarchy (v2: see v2.go); every workload is a process
// (`ddiskqos workload`) placed in a new child cgroup before it issues any
// I/O. ddiskqos runs in-process with the cgroup-directory source over that
// parent, built by app.Build as `ddiskqos run` builds it. The neighbour's
// throughput is read from its cgroup's counters every few milliseconds.
// Everything it creates — processes, cgroups, loop device, scheduler — is
// removed or restored at the end, also on failure or cancellation.
package contention

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Mode is how long and how thorough a run is.
type Mode string

const (
	ModeQuick   Mode = "quick"   // 1 trial, 2 neighbours, short phases: proves the harness
	ModeDefault Mode = "default" // 3 trials, every neighbour
	ModeFull    Mode = "full"    // 5 trials, longer victims: the committed report
)

// Neighbour is a kind of noisy neighbour.
type Neighbour string

const (
	// SeqRead streams a file with O_DIRECT 1 MiB reads, 32 in flight.
	SeqRead Neighbour = "seqread"
	// RandRead floods 4k O_DIRECT random reads, 32 in flight.
	RandRead Neighbour = "randread"
	// DirectWrite writes 1 MiB O_DIRECT requests, 32 in flight.
	DirectWrite Neighbour = "directwrite"
	// BufWrite writes through the page cache and calls fdatasync every
	// FsyncEvery bytes; on cgroup v1 the kernel's writeback of its pages
	// is not charged to its cgroup.
	BufWrite Neighbour = "bufwrite"
)

// Neighbours lists every kind in report order.
var Neighbours = []Neighbour{SeqRead, RandRead, DirectWrite, BufWrite}

// Describe says what the neighbour does, for the report.
func (n Neighbour) Describe() string {
	switch n {
	case SeqRead:
		return "sequential O_DIRECT reader, 1 MiB requests, iodepth 32"
	case RandRead:
		return "4k O_DIRECT random-read flood, iodepth 32"
	case DirectWrite:
		return "O_DIRECT writer, 1 MiB requests, iodepth 32"
	case BufWrite:
		return "buffered writer, 1 MiB writes, fdatasync every 32 MiB"
	}
	return string(n)
}

// Config is one way of running the device: the scheduler and who, if
// anyone, shapes the I/O.
type Config string

const (
	// Idle is the victims alone on the device's default scheduler.
	Idle Config = "idle"
	// IdleBFQ is the victims alone on BFQ: the reference of the
	// configurations that run on BFQ.
	IdleBFQ Config = "idle-bfq"
	// Original is the device's default scheduler, no QoS: the problem.
	Original Config = "original"
	// BFQ is BFQ with equal weights.
	BFQ Config = "bfq"
	// Static is BFQ with weights set by hand: 1000 for the victims, 100
	// for the neighbour (blkio.bfq.weight).
	Static Config = "static"
	// ThrottleFixed is the default scheduler with a fixed
	// blkio.throttle.{read,write}_bps_device cap on the neighbour at
	// ThrottleShare of its throughput under Original in the same trial.
	ThrottleFixed Config = "throttle-fixed"
	// DDiskQoS is the daemon with its defaults on the default scheduler.
	DDiskQoS Config = "ddiskqos"
	// DDiskQoSBFQ is the daemon with its defaults on BFQ.
	DDiskQoSBFQ Config = "ddiskqos-bfq"
)

// Configs lists every configuration in the order a trial runs them;
// Original must come before ThrottleFixed, whose cap it measures.
var Configs = []Config{Idle, IdleBFQ, Original, BFQ, Static, ThrottleFixed, DDiskQoS, DDiskQoSBFQ}

// Describe says what the configuration is on cgroup version cg ("v1",
// "v2"), for the report.
func (c Config) Describe(cg string) string {
	v2 := cg == "v2"
	switch c {
	case Idle:
		return "the victims alone, default scheduler"
	case IdleBFQ:
		return "the victims alone, BFQ (the reference of bfq, static and ddiskqos-bfq)"
	case Original:
		return "default scheduler, no QoS"
	case BFQ:
		return "BFQ, equal weights"
	case Static:
		if v2 {
			return "BFQ, io.bfq.weight 1000 (victims) / 100 (neighbour) set by hand"
		}
		return "BFQ, weights 1000 (victims) / 100 (neighbour) set by hand"
	case ThrottleFixed:
		if v2 {
			return fmt.Sprintf("default scheduler, neighbour capped at %d %% of its no-QoS bytes/s (io.max rbps/wbps)", int(ThrottleShare*100))
		}
		return fmt.Sprintf("default scheduler, neighbour capped at %d %% of its no-QoS bytes/s (blkio.throttle.*_bps_device)", int(ThrottleShare*100))
	case DDiskQoS:
		if v2 {
			return "ddiskqos daemon, defaults, default scheduler, iocost enabled on the device with the calibrated model and latency targets (mechanism iocost-weight); iocost is off in every other configuration"
		}
		return "ddiskqos daemon, defaults, default scheduler"
	case DDiskQoSBFQ:
		return "ddiskqos daemon, defaults, BFQ"
	}
	return string(c)
}

// bfq reports whether c runs on BFQ.
func (c Config) bfq() bool { return c == IdleBFQ || c == BFQ || c == Static || c == DDiskQoSBFQ }

// idle reports whether c runs the victims alone.
func (c Config) idle() bool { return c == Idle || c == IdleBFQ }

// Reference is the idle configuration c's victims are compared with.
func (c Config) Reference() Config {
	if c.bfq() {
		return IdleBFQ
	}
	return Idle
}

// daemon reports whether c runs ddiskqos.
func (c Config) daemon() bool { return c == DDiskQoS || c == DDiskQoSBFQ }

// ThrottleShare is the fixed throttle's cap as a share of the neighbour's
// no-QoS throughput.
const ThrottleShare = 0.5

// Weights of Static.
const (
	VictimWeight    = 1000
	NeighbourWeight = 100
)

// Plan is what one run does.
type Plan struct {
	// AllowTmpfs: the volume may sit on tmpfs (the host scenario with a
	// --device-class named: a fast, CPU-bound device class).
	AllowTmpfs bool `json:"allow_tmpfs,omitempty"`
	// NoLoop: the files straight on --dir's file system and the disk
	// under it as it is (volume.Options.NoLoop), the host scenario's
	// --no-loop.
	NoLoop     bool          `json:"no_loop,omitempty"`
	Mode       Mode          `json:"mode"`
	Trials     int           `json:"trials"`
	Neighbours []Neighbour   `json:"neighbours"`
	Configs    []Config      `json:"configs"`
	Warmup     time.Duration `json:"warmup_ns"`  // the neighbour alone before the victims
	Web        time.Duration `json:"web_ns"`     // how long the web-like victim runs
	WebIOPS    float64       `json:"web_iops"`   // its request rate
	ColdReads  int           `json:"cold_reads"` // cold reads of each size per cell
	// After is how long the neighbour keeps running after the victims
	// stopped; its throughput is reported per second of it.
	After time.Duration `json:"after_ns"`
	// BigFile is the file the readers stream or flood; WriteSpan the
	// region each writer loops over.
	BigFile   int64 `json:"big_file"`
	WebFile   int64 `json:"web_file"`
	WriteSpan int64 `json:"write_span"`
	// FsyncEvery is the buffered writer's fdatasync period.
	FsyncEvery int64 `json:"fsync_every"`
	// SampleEvery is the period of the neighbour's counter samples.
	SampleEvery time.Duration `json:"sample_every_ns"`
}

// ColdSizes are the cold reads' sizes, as in the paper.
var ColdSizes = []int64{1 << 20, 10 << 20}

// PlanFor returns the plan of a mode; trials > 0 overrides its trials.
func PlanFor(m Mode, trials int) (Plan, error) {
	p := Plan{Mode: m, Configs: Configs, WebIOPS: 100, After: 2 * time.Second,
		FsyncEvery: 32 << 20, SampleEvery: 5 * time.Millisecond}
	switch m {
	case ModeQuick:
		p.Trials, p.Neighbours = 1, []Neighbour{SeqRead, RandRead}
		p.Warmup, p.Web, p.ColdReads = 3*time.Second, 2*time.Second, 1
		p.BigFile, p.WebFile, p.WriteSpan = 256<<20, 64<<20, 128<<20
	case ModeDefault:
		p.Trials, p.Neighbours = 3, Neighbours
		p.Warmup, p.Web, p.ColdReads = 4*time.Second, 5*time.Second, 2
		p.BigFile, p.WebFile, p.WriteSpan = 1<<30, 256<<20, 512<<20
	case ModeFull:
		p.Trials, p.Neighbours = 5, Neighbours
		p.Warmup, p.Web, p.ColdReads = 5*time.Second, 10*time.Second, 3
		p.BigFile, p.WebFile, p.WriteSpan = 2<<30, 512<<20, 1<<30
	default:
		return p, fmt.Errorf("unknown mode %q (want quick, default or full)", m)
	}
	if trials < 0 {
		return p, fmt.Errorf("trials %d: want at least 1", trials)
	}
	if trials > 0 {
		p.Trials = trials
	}
	return p, nil
}

// Select narrows the plan to the named neighbours and configurations
// (nil: keep the mode's). Idle, IdleBFQ and Original are always kept,
// first: every ratio in the report is against them.
func (p *Plan) Select(neighbours []string, configs []string) error {
	if len(neighbours) > 0 {
		var nbs []Neighbour
		for _, n := range neighbours {
			if !slices.Contains(Neighbours, Neighbour(n)) {
				return fmt.Errorf("unknown neighbour %q (want %s)", n, joinNames(Neighbours))
			}
			if !slices.Contains(nbs, Neighbour(n)) {
				nbs = append(nbs, Neighbour(n))
			}
		}
		p.Neighbours = nbs
	}
	if len(configs) > 0 {
		cs, err := pickConfigs(configs, Configs, []Config{Idle, IdleBFQ, Original}, "")
		if err != nil {
			return err
		}
		p.Configs = cs
	}
	return nil
}

// pickConfigs is keep and the configurations named, each one of all, in
// the trial order of all; where says which scenario an unknown name is
// not one of.
func pickConfigs(names []string, all, keep []Config, where string) ([]Config, error) {
	cs := slices.Clone(keep)
	for _, c := range names {
		if !slices.Contains(all, Config(c)) {
			return nil, fmt.Errorf("unknown configuration %q%s (want %s)", c, where, joinNames(all))
		}
		if !slices.Contains(cs, Config(c)) {
			cs = append(cs, Config(c))
		}
	}
	slices.SortFunc(cs, func(a, b Config) int { return slices.Index(all, a) - slices.Index(all, b) })
	return cs, nil
}

func joinNames[T ~string](xs []T) string {
	var s []string
	for _, x := range xs {
		s = append(s, string(x))
	}
	return strings.Join(s, ", ")
}

// VolumeSize is what the plan's files need, with room to spare.
func (p Plan) VolumeSize() int64 {
	var cold int64
	for _, s := range ColdSizes {
		cold += s
	}
	return p.BigFile + p.WebFile + cold + 2*p.WriteSpan + 512<<20
}
