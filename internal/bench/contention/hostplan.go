package contention

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Scenario is what a run of bench contention measures.
type Scenario string

const (
	// ScenarioCell is one noisy neighbour at a time against one victim at
	// a time, with a fresh daemon per cell: a lab cell (Run).
	ScenarioCell Scenario = "cell"
	// ScenarioHost is a host as it lives: a streamer that never stops, the
	// daemon up from the start, a web service and eight light tenants
	// beside it, and the cold reads of new containers (RunHost).
	ScenarioHost Scenario = "host"
)

// CapPercents are the static caps of the host scenario's frontier, in
// percent of the streamer's no-QoS throughput in the same trial.
var CapPercents = []int{2, 5, 10, 25, 50}

// CapConfig is the host configuration that caps the streamer at pct % of
// its no-QoS throughput: "static-<pct>".
func CapConfig(pct int) Config { return Config("static-" + strconv.Itoa(pct)) }

// CapShare is the cap of a "static-<pct>" configuration as a share (0.1
// for static-10), pct a whole number from 1 to 99 (CapPercents are the
// frontier's default caps; --configs may name any other); ok is false
// for any other configuration.
func (c Config) CapShare() (share float64, ok bool) { return c.pctShare("static-") }

// RearmConfig is the host configuration that caps the streamer at pct %
// of its no-QoS throughput and writes the cap again every RearmEvery:
// "rearm-<pct>". Each write starts a new blk-throttle slice, so the cap
// holds within a period instead of the slice's 100 ms: the throttle's own
// frontier, the loop a few lines of shell would be.
func RearmConfig(pct int) Config { return Config("rearm-" + strconv.Itoa(pct)) }

// RearmEvery is how often a rearm-<pct> cap is written again.
const RearmEvery = 10 * time.Millisecond

// RearmShare is the cap of a "rearm-<pct>" configuration as a share, as
// CapShare; ok is false for any other configuration.
func (c Config) RearmShare() (share float64, ok bool) { return c.pctShare("rearm-") }

func (c Config) pctShare(prefix string) (share float64, ok bool) {
	s, found := strings.CutPrefix(string(c), prefix)
	if !found {
		return 0, false
	}
	pct, err := strconv.Atoi(s)
	if err != nil || pct < 1 || pct > 99 || s != strconv.Itoa(pct) {
		return 0, false
	}
	return float64(pct) / 100, true
}

// TargetConfig is the host configuration that runs the daemon with
// latency_target m× (otherwise its defaults): "ddiskqos-<m>x".
func TargetConfig(m float64) Config {
	return Config("ddiskqos-" + strconv.FormatFloat(m, 'f', -1, 64) + "x")
}

// TargetMultiple is the latency_target multiple of a "ddiskqos-<m>x"
// configuration (4 for ddiskqos-4x), m from 1 to 100: the point an
// operator's latency_target would put ddiskqos at, beside the defaults'
// (--configs may name any); ok is false for any other configuration.
func (c Config) TargetMultiple() (m float64, ok bool) {
	s, found := strings.CutPrefix(string(c), "ddiskqos-")
	if !found {
		return 0, false
	}
	s, found = strings.CutSuffix(s, "x")
	if !found {
		return 0, false
	}
	m, err := strconv.ParseFloat(s, 64)
	if err != nil || m < 1 || m > 100 || TargetConfig(m) != c {
		return 0, false
	}
	return m, true
}

// DDiskQoSCapping is the daemon with work_conserving false: caps whenever
// a better level is active beside a heavy worse one, as before work
// conservation; --configs adds it beside the defaults.
const DDiskQoSCapping Config = "ddiskqos-capping"

// HostConfigs lists the host scenario's configurations in the order a
// trial runs them; Original comes before the caps, which it sizes.
var HostConfigs = func() []Config {
	cs := []Config{Idle, Original, DDiskQoS}
	for _, p := range CapPercents {
		cs = append(cs, CapConfig(p))
	}
	return cs
}()

// HostDescribe says what a host configuration is on cgroup version cg.
func HostDescribe(c Config, cg string) string {
	if share, ok := c.CapShare(); ok {
		knob := "blkio.throttle.read_bps_device"
		if cg == "v2" {
			knob = "io.max rbps"
		}
		return fmt.Sprintf("no QoS but a static cap on the streamer at %g %% of its no-QoS throughput in the same trial (%s), set before it starts: what an operator could set by hand", share*100, knob)
	}
	switch c {
	case Idle:
		return "the victims alone, no streamer (the reference)"
	case Original:
		return "the streamer beside the victims, no QoS"
	case DDiskQoS:
		return "ddiskqos daemon with its defaults (in-process, over the run's cgroups), up before the streamer starts"
	case DDiskQoSCapping:
		return "ddiskqos daemon as `ddiskqos`, but work_conserving false: caps whenever the web service or a tenant is active beside the streamer"
	}
	if share, ok := c.RearmShare(); ok {
		knob := "blkio.throttle.read_bps_device"
		if cg == "v2" {
			knob = "io.max rbps"
		}
		return fmt.Sprintf("no QoS but a cap on the streamer at %g %% of its no-QoS throughput in the same trial (%s), written again every %s (each write starts a new throttle slice): the throttle's own frontier", share*100, knob, RearmEvery)
	}
	if m, ok := c.TargetMultiple(); ok {
		return fmt.Sprintf("ddiskqos daemon as `ddiskqos`, but latency_target %gx (the controller's target %g× the device's unloaded p99, not the default 2×)", m, m)
	}
	return string(c)
}

// HostPlan is what one run of the host scenario does.
type HostPlan struct {
	Mode   Mode `json:"mode"`
	Trials int  `json:"trials"`
	// Scheduler is the device's scheduler in every cell: "" for its
	// default, or "bfq".
	Scheduler string `json:"scheduler,omitempty"`
	// Streamer is the neighbour that runs all along: "" (greedy: 1 MiB
	// O_DIRECT reads, 32 in flight, unpaced) or a paced one (SetStreamer).
	Streamer string `json:"streamer,omitempty"`
	// Device names the device class in the report ("" for none given):
	// what the loop device's backing file sits on.
	Device string `json:"device,omitempty"`
	// NoLoop: no loop device, the files straight on the directory's
	// file system and the disk under it measured as it is (--no-loop).
	NoLoop  bool     `json:"no_loop,omitempty"`
	Configs []Config `json:"configs"`
	// Warmup is the streamer alone (with the daemon, if any) before the
	// victims; Victims how long the web and light readers run; After how
	// long the streamer keeps running after the victims ended.
	Warmup  time.Duration `json:"warmup_ns"`
	Victims time.Duration `json:"victims_ns"`
	After   time.Duration `json:"after_ns"`
	// Probe is how long the unloaded device is measured at the start:
	// the web reader alone, before any cell.
	Probe     time.Duration `json:"probe_ns"`
	WebIOPS   float64       `json:"web_iops"`
	Light     int           `json:"light_tenants"`
	LightIOPS float64       `json:"light_iops"`
	// ColdReads is how many cold reads of each size run during the
	// victim phase, each from a new cgroup, spread over its first 80 %.
	ColdReads int `json:"cold_reads"`
	// MaxLoad is the highest 1-minute load average at the start of a
	// run that writes its report; QuietFactor the highest idle web p99 ÷
	// the unloaded probe's p99.
	MaxLoad     float64       `json:"max_load"`
	QuietFactor float64       `json:"quiet_factor"`
	BigFile     int64         `json:"big_file"`
	WebFile     int64         `json:"web_file"`
	SampleEvery time.Duration `json:"sample_every_ns"`
}

// HostPlanFor returns the host scenario's plan of a mode; trials > 0
// overrides its trials.
func HostPlanFor(m Mode, trials int) (HostPlan, error) {
	p := HostPlan{Mode: m, Configs: HostConfigs, WebIOPS: 100, Light: 8, LightIOPS: 5,
		MaxLoad: 1, QuietFactor: 10, SampleEvery: 5 * time.Millisecond}
	switch m {
	case ModeQuick:
		p.Trials, p.Warmup, p.Victims, p.After, p.Probe, p.ColdReads = 1, 8*time.Second, 15*time.Second, 3*time.Second, 3*time.Second, 1
		p.BigFile, p.WebFile = 256<<20, 64<<20
	case ModeDefault:
		p.Trials, p.Warmup, p.Victims, p.After, p.Probe, p.ColdReads = 3, 35*time.Second, 65*time.Second, 4*time.Second, 10*time.Second, 3
		p.BigFile, p.WebFile = 1<<30, 256<<20
	case ModeFull:
		p.Trials, p.Warmup, p.Victims, p.After, p.Probe, p.ColdReads = 5, 35*time.Second, 65*time.Second, 4*time.Second, 10*time.Second, 3
		p.BigFile, p.WebFile = 2<<30, 512<<20
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

// Select narrows the plan to the named configurations (nil: all). Idle
// and Original are always kept, first: every ratio is against them, and
// Original sizes the caps.
func (p *HostPlan) Select(configs []string) error {
	if len(configs) == 0 {
		return nil
	}
	// Caps beyond the default frontier's (static-95, say) and the daemon
	// with another latency target (ddiskqos-4x) may be named too; they
	// run after the defaults, the targets after the caps, each lowest
	// first.
	var extra, rearms, targets []Config
	for _, c := range configs {
		if _, ok := Config(c).CapShare(); ok && !slices.Contains(HostConfigs, Config(c)) {
			extra = append(extra, Config(c))
		}
		if _, ok := Config(c).RearmShare(); ok {
			rearms = append(rearms, Config(c))
		}
		if _, ok := Config(c).TargetMultiple(); ok {
			targets = append(targets, Config(c))
		}
	}
	slices.SortFunc(extra, func(a, b Config) int {
		sa, _ := a.CapShare()
		sb, _ := b.CapShare()
		return cmp.Compare(sa, sb)
	})
	slices.SortFunc(rearms, func(a, b Config) int {
		sa, _ := a.RearmShare()
		sb, _ := b.RearmShare()
		return cmp.Compare(sa, sb)
	})
	slices.SortFunc(targets, func(a, b Config) int {
		ma, _ := a.TargetMultiple()
		mb, _ := b.TargetMultiple()
		return cmp.Compare(ma, mb)
	})
	all := append(slices.Clone(HostConfigs), slices.Compact(extra)...)
	all = append(all, slices.Compact(rearms)...)
	all = append(all, slices.Compact(targets)...)
	all = append(all, DDiskQoSCapping)
	cs, err := pickConfigs(configs, all, []Config{Idle, Original}, " for the host scenario (or static-<1..99>, rearm-<1..99>, ddiskqos-<1..100>x, ddiskqos-capping)")
	if err != nil {
		return err
	}
	p.Configs = cs
	return nil
}

// SetScheduler sets the scheduler of every cell: "" or "default" for the
// device's default, or "bfq".
func (p *HostPlan) SetScheduler(s string) error {
	switch s {
	case "", "default":
		p.Scheduler = ""
	case "bfq":
		p.Scheduler = "bfq"
	default:
		return fmt.Errorf("unknown scheduler %q (want default or bfq)", s)
	}
	return nil
}

// SetStreamer sets the neighbour: "greedy" (or "") for 1 MiB reads 32 in
// flight, unpaced; "paced-<MB/s>-qd<N>" for a backup-like reader paced to
// MB/s (10^6 bytes) with N requests in flight (paced-50-qd1,
// paced-200-qd4: a moderate neighbour).
func (p *HostPlan) SetStreamer(s string) error {
	if s == "" || s == "greedy" {
		p.Streamer = ""
		return nil
	}
	if _, _, ok := pacedStreamer(s); !ok {
		return fmt.Errorf("streamer %q: want greedy or paced-<MB/s>-qd<N> (such as paced-50-qd1), MB/s from 1 to 100000, N from 1 to 64", s)
	}
	p.Streamer = s
	return nil
}

// pacedStreamer reads "paced-<MB/s>-qd<N>": its rate in bytes/s and depth.
func pacedStreamer(s string) (rate int64, depth int, ok bool) {
	rest, found := strings.CutPrefix(s, "paced-")
	if !found {
		return 0, 0, false
	}
	mbs, qd, found := strings.Cut(rest, "-qd")
	if !found {
		return 0, 0, false
	}
	m, err1 := strconv.Atoi(mbs)
	n, err2 := strconv.Atoi(qd)
	if err1 != nil || err2 != nil || m < 1 || m > 100000 || n < 1 || n > 64 || s != fmt.Sprintf("paced-%d-qd%d", m, n) {
		return 0, 0, false
	}
	return int64(m) * 1e6, n, true
}

// StreamerDescribe says what the plan's streamer is.
func (p HostPlan) StreamerDescribe() string {
	if rate, depth, ok := pacedStreamer(p.Streamer); ok {
		return fmt.Sprintf("a backup-like sequential O_DIRECT reader, 1 MiB requests, %d in flight, paced to %d MB/s: a moderate neighbour", depth, rate/1e6)
	}
	return SeqRead.Describe()
}

// Moderate reports whether the plan's streamer is paced: the no-harm case.
func (p HostPlan) Moderate() bool { return p.Streamer != "" }

// SetPhases overrides the warm-up and victim phase (0: keep the mode's).
func (p *HostPlan) SetPhases(warmup, victims time.Duration) error {
	if warmup < 0 || victims < 0 || (victims > 0 && victims < time.Second) {
		return fmt.Errorf("warm-up %s, victims %s: want a warm-up of at least 0 s and victims of at least 1 s", warmup, victims)
	}
	if warmup > 0 {
		p.Warmup = warmup
	}
	if victims > 0 {
		p.Victims = victims
	}
	return nil
}

// VolumeSize is what the plan's files need, with room to spare.
func (p HostPlan) VolumeSize() int64 { return p.benchPlan().VolumeSize() }

// benchPlan is the plan the shared rig (files, sampler) reads.
func (p HostPlan) benchPlan() Plan {
	return Plan{AllowTmpfs: p.Device != "", NoLoop: p.NoLoop, Mode: p.Mode, Trials: p.Trials, Configs: p.Configs, Warmup: p.Warmup, Web: p.Victims, WebIOPS: p.WebIOPS,
		ColdReads: p.ColdReads, After: p.After, BigFile: p.BigFile, WebFile: p.WebFile, SampleEvery: p.SampleEvery}
}

// Estimate is about how long a run of the plan takes: the probe, then
// per trial the idle cell's victims and every other cell's warm-up,
// victims and after, plus a second or two of setup per cell and a
// minute for the volume.
func (p HostPlan) Estimate() time.Duration {
	perTrial := time.Duration(0)
	for _, c := range p.Configs {
		perTrial += p.Victims + 2*time.Second
		if c != Idle {
			perTrial += p.Warmup + p.After
		}
	}
	return p.Probe + time.Duration(p.Trials)*perTrial + time.Minute
}
