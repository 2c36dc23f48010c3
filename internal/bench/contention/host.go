package contention

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// ErrNotQuiet says the host was too busy at the start of a run to measure
// anything worth a report.
var ErrNotQuiet = errors.New("host not quiet")

// HostOptions configure RunHost; the fields shared with Options mean the
// same.
type HostOptions struct {
	Plan     HostPlan
	Exe      string
	ExeArgs  []string
	Env      []string
	Roots    host.Roots
	Dir      string
	Progress io.Writer
	Command  string
	// Build is the binary's own build (report.Binary), for the report.
	Build report.Build
	// AllowBusy runs (and lets the caller write the report) although the
	// host is not quiet; the report says so.
	AllowBusy bool
}

// StreamerStats is what the streamer did in one cell, bytes/s.
type StreamerStats struct {
	Warm   Window `json:"warm"`    // second half of the warm-up
	During Window `json:"during"`  // while the victims ran
	After1 Window `json:"after_1"` // 0–1 s after the victims ended
	// AfterRest is from 1 s after the victims ended to the end of After.
	AfterRest Window  `json:"after_rest"`
	Process   float64 `json:"process_bps"`
	Cap       uint64  `json:"cap_bps,omitempty"` // static caps
	Samples   int     `json:"samples"`
}

// HostCell is one configuration in one trial of the host scenario.
type HostCell struct {
	Trial     int    `json:"trial"`
	Config    Config `json:"config"`
	Scheduler string `json:"scheduler"`
	// Web is the web-like reader's service latency, µs; WebResponse from
	// when each request was due.
	Web         workload.Latency `json:"web_us"`
	WebResponse workload.Latency `json:"web_response_us"`
	WebOps      int64            `json:"web_ops"`
	// Light is every light tenant's requests pooled, µs (exact
	// nearest-rank quantiles over all of them).
	Light    workload.Latency `json:"light_us"`
	LightOps int64            `json:"light_ops"`
	// LightPhasesMs is when each light tenant started, ms after the web
	// reader (lightPhases).
	LightPhasesMs []float64 `json:"light_phases_ms,omitempty"`
	// WebSettled and LightSettled are the same without each victim's
	// first second of requests (web WebIOPS, each light tenant
	// LightIOPS): what is left when the first requests of a new
	// container, which wait behind what the streamer already queued at
	// the device before any loop can react, are set aside.
	WebSettled   workload.Latency `json:"web_settled_us"`
	LightSettled workload.Latency `json:"light_settled_us"`
	// Cold are the cold reads' times per size (ColdSizes order), ms.
	Cold     [][]float64    `json:"cold_ms"`
	Streamer *StreamerStats `json:"streamer,omitempty"`
	Daemon   *DaemonStats   `json:"daemon,omitempty"`
	// Seconds is a ddiskqos cell's timeline: per second, what the daemon
	// did and how the victims fared (timeline.go).
	Seconds []Second `json:"seconds,omitempty"`
	Wall    float64  `json:"wall_s"`
}

// HostResult is a whole run of the host scenario.
type HostResult struct {
	Scenario Scenario     `json:"scenario"`
	Command  string       `json:"command"`
	Build    report.Build `json:"build"`
	Plan     HostPlan     `json:"plan"`
	Kernel   string       `json:"kernel"`
	CPUs     int          `json:"cpus"`
	Cgroup   string       `json:"cgroup"`
	TestVM   bool         `json:"test_vm,omitempty"`
	Device   string       `json:"device"`
	Backing  string       `json:"backing_file"`
	// Below is what the backing file sits on (BackingOf): the device
	// class's physics as the report states it.
	Below string `json:"below"`
	// DefaultScheduler is the device's; Scheduler the one every cell ran.
	DefaultScheduler string `json:"default_scheduler"`
	Scheduler        string `json:"scheduler"`
	// Unloaded is the web reader alone on the device at the start, before
	// any cell: the device's unloaded latency.
	Unloaded  workload.Latency `json:"unloaded_us"`
	LoadStart string           `json:"load_start"`
	LoadEnd   string           `json:"load_end"`
	AllowBusy bool             `json:"allow_busy,omitempty"`
	Nice      int              `json:"nice"`
	Start     time.Time        `json:"start"`
	End       time.Time        `json:"end"`
	Cells     []HostCell       `json:"cells"`
}

// LoadTooHigh says why a 1-minute load average (as /proc/loadavg gives
// it) is above max, or "" when it is not.
func LoadTooHigh(load string, max float64) string {
	v, err := strconv.ParseFloat(load, 64)
	if err != nil {
		return fmt.Sprintf("1-minute load average unknown (%q)", load)
	}
	if v > max {
		return fmt.Sprintf("1-minute load average %s at the start, above %g", load, max)
	}
	return ""
}

// RunHost runs the host scenario's plan. The result so far is returned
// with any error. When the load average is above the plan's MaxLoad at the
// start it returns ErrNotQuiet at once, having created nothing, unless
// AllowBusy.
func RunHost(ctx context.Context, o HostOptions) (res *HostResult, err error) {
	if o.Exe == "" {
		return nil, errors.New("contention: no workload executable")
	}
	if o.Roots.Sys == "" {
		o.Roots = host.Roots{Sys: "/sys", Proc: "/proc"}
	}
	p := o.Plan
	if err := noBFQ(o.Roots, nil, p.Scheduler); err != nil {
		return nil, err
	}
	res = &HostResult{Scenario: ScenarioHost, Command: o.Command, Build: o.Build, Plan: p, CPUs: runtime.NumCPU(),
		Start: time.Now(), LoadStart: loadAvg(o.Roots.Proc), AllowBusy: o.AllowBusy, TestVM: os.Getenv("DDISKQOS_IN_VM") == "1"}
	if why := LoadTooHigh(res.LoadStart, p.MaxLoad); why != "" && !o.AllowBusy {
		return res, fmt.Errorf("%w: %s (--allow-busy runs anyway and marks the report)", ErrNotQuiet, why)
	}
	b := &bench{o: Options{Exe: o.Exe, ExeArgs: o.ExeArgs, Env: o.Env, Roots: o.Roots, Dir: o.Dir, Progress: o.Progress, Command: o.Command, Plan: p.benchPlan()},
		p: p.benchPlan()}
	b.log = func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "bench contention (host): "+format+"\n", a...)
		}
	}
	defer func() {
		if terr := b.teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
		res.End, res.LoadEnd = time.Now(), loadAvg(o.Roots.Proc)
	}()
	m, err := b.open(ctx, o.Roots, o.Dir)
	res.Kernel, res.Cgroup, res.Nice = m.kernel, m.cgroup, m.nice
	res.Device, res.DefaultScheduler, res.Backing = m.device, m.defaultScheduler, m.backing
	res.Scheduler = cmpOr(p.Scheduler, m.defaultScheduler)
	res.Below = BackingOf(o.Roots, o.Dir)
	if err != nil {
		return res, err
	}
	syscall.Sync()
	if !sleepCtx(ctx, 2*time.Second) {
		return res, ctx.Err()
	}
	if err := b.vol.SetScheduler(res.Scheduler); err != nil {
		return res, err
	}
	b.log("device %s, scheduler %s: the web reader alone for %s (the unloaded device)", b.vol.Name, res.Scheduler, p.Probe)
	probe, err := b.runVictim(ctx, "probe", Idle, b.webSpec(p.Probe))
	if serr := b.vol.SetScheduler(b.vol.DefaultScheduler); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return res, fmt.Errorf("unloaded probe: %w", err)
	}
	res.Unloaded = probe.Latency
	b.log("unloaded: web p50 %.0f µs, p99 %.0f µs; %d trials × %d configurations, about %s",
		probe.Latency.P50, probe.Latency.P99, p.Trials, len(p.Configs), p.Estimate().Round(time.Minute))
	for t := range p.Trials {
		for _, c := range p.Configs {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			cell, err := b.hostCell(ctx, res, t, c)
			if err != nil {
				return res, fmt.Errorf("trial %d, %s: %w", t+1, c, err)
			}
			res.Cells = append(res.Cells, cell)
			b.log("%s", hostCellLine(cell))
		}
	}
	return res, nil
}

// webSpec is the web-like reader: 4 KiB O_DIRECT random reads at the
// plan's rate for d.
func (b *bench) webSpec(d time.Duration) workload.Spec {
	return workload.Spec{Op: workload.OpRandRead, Path: b.files.web, Direct: true, BlockSize: 4 << 10, IOPS: b.p.WebIOPS, Duration: d}
}

// noQoSWarmHost is the streamer's warm-up throughput under Original in
// this trial: the base of the static caps.
func noQoSWarmHost(res *HostResult, trial int) (float64, bool) {
	for _, c := range res.Cells {
		if c.Config == Original && c.Trial == trial && c.Streamer != nil {
			return max(c.Streamer.Warm.Cgroup, 0), c.Streamer.Warm.Cgroup > 0
		}
	}
	return 0, false
}

// rearm writes lim on rel's cgroup every RearmEvery until ctx ends.
func (b *bench) rearm(ctx context.Context, rel string, lim cgroupfs.Limits) error {
	t := time.NewTicker(RearmEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if err := b.h.SetLimits(rel, b.vol.Dev, lim); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("re-arming the cap on %s: %w", rel, err)
		}
	}
}

// hostCell runs one configuration of the host scenario.
func (b *bench) hostCell(ctx context.Context, res *HostResult, trial int, c Config) (cell HostCell, err error) {
	p := res.Plan
	t0 := time.Now()
	cell = HostCell{Trial: trial + 1, Config: c, Scheduler: res.Scheduler}
	if err := b.vol.SetScheduler(cell.Scheduler); err != nil {
		return cell, err
	}
	defer func() {
		if serr := b.vol.SetScheduler(b.vol.DefaultScheduler); serr != nil {
			err = errors.Join(err, serr)
		}
		cell.Wall = time.Since(t0).Seconds()
	}()
	var tl *timeline
	_, target := c.TargetMultiple()
	if c == DDiskQoS || target || c == DDiskQoSCapping {
		var lt config.LatencyTarget
		if target { // ddiskqos-4x: the name holds config's own "4x"
			var err error
			if lt, err = config.ParseLatencyTarget(strings.TrimPrefix(string(c), "ddiskqos-")); err != nil {
				return cell, fmt.Errorf("%s: %w", c, err)
			}
		}
		d, err := startDaemon(ctx, b.o.Roots, b.vol.Name, b.parent, lt, c == DDiskQoSCapping)
		if err != nil {
			return cell, fmt.Errorf("start ddiskqos: %w", err)
		}
		tl = startTimeline(d.bd.D.Acquire, b.vol.Dev.String())
		defer func() {
			st, derr := d.stop()
			cell.Daemon = &st
			if derr != nil {
				err = errors.Join(err, fmt.Errorf("ddiskqos: %w", derr))
			}
		}()
	}
	// Victims started from goroutines end before the cell returns, also
	// on error: their processes die with cctx.
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	var stream *workload.Proc
	var smp *sampler
	var streamRel string
	stopRearm := func() error { return nil } // a rearm-<pct> cell's writer
	if c != Idle {
		if streamRel, err = b.cgroup("streamer"); err != nil {
			return cell, err
		}
		cell.Streamer = &StreamerStats{}
		share, static := c.CapShare()
		rshare, rearm := c.RearmShare()
		if rearm {
			share = rshare
		}
		if static || rearm {
			base, ok := noQoSWarmHost(res, trial+1)
			if !ok {
				return cell, errors.New("no original cell in this trial to size the static cap from")
			}
			cell.Streamer.Cap = uint64(base * share)
			lim := cgroupfs.Limits{RBps: cell.Streamer.Cap}
			if err := b.h.SetLimits(streamRel, b.vol.Dev, lim); err != nil {
				return cell, err
			}
			if rearm {
				rctx, rcancel := context.WithCancel(cctx)
				done := make(chan error, 1)
				go func() { done <- b.rearm(rctx, streamRel, lim) }()
				var once sync.Once
				var rerr error
				stopRearm = func() error {
					once.Do(func() { rcancel(); rerr = <-done })
					return rerr
				}
				defer stopRearm()
			}
		}
		if stream, err = b.start(cctx, streamRel, b.streamerSpec(p.Streamer)); err != nil {
			return cell, err
		}
		if smp, err = startSampler(b.h, streamRel, b.vol.Dev, filepath.Join(b.o.Roots.Sys, "block", b.vol.Name, "stat"), p.SampleEvery); err != nil {
			return cell, err
		}
		defer smp.stop()
		if err := stream.Go(); err != nil {
			return cell, err
		}
		smp.mark()
		if !sleepCtx(ctx, p.Warmup) {
			return cell, ctx.Err()
		}
	}

	// The web reader and the light tenants, each in a new cgroup, all
	// started before any does I/O, then let go: the web reader first,
	// the light tenants at their phases (lightPhases).
	type victim struct {
		p   *workload.Proc
		rel string
	}
	var vs []victim
	for i := range 1 + p.Light {
		name, s := "web", b.webSpec(p.Victims)
		s.KeepLatencies = true
		if i > 0 {
			name = fmt.Sprintf("light%d", i)
			s = workload.Spec{Op: workload.OpRandRead, Path: b.files.web, Direct: true, BlockSize: 4 << 10,
				IOPS: p.LightIOPS, Duration: p.Victims, KeepLatencies: true}
		}
		rel, err := b.cgroup(name)
		if err != nil {
			return cell, err
		}
		vp, err := b.start(cctx, rel, s)
		if err != nil {
			return cell, fmt.Errorf("%s: %w", name, err)
		}
		vs = append(vs, victim{vp, rel})
	}
	phases := lightPhases(p.Light, p.LightIOPS, trial)
	vStart := time.Now()
	for i, v := range vs {
		if i > 0 {
			if !sleepCtx(ctx, time.Until(vStart.Add(phases[i-1]))) {
				return cell, ctx.Err()
			}
			cell.LightPhasesMs = append(cell.LightPhasesMs, float64(phases[i-1].Microseconds())/1e3)
		}
		if err := v.p.Go(); err != nil {
			return cell, err
		}
	}
	// The cold reads of new containers, spread over the phase's first 80 %.
	cell.Cold = make([][]float64, len(ColdSizes))
	var coldErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for k := range p.ColdReads {
			at := vStart.Add(time.Duration(float64(p.Victims) * 0.8 * (float64(k) + 0.5) / float64(p.ColdReads)))
			if !sleepCtx(cctx, time.Until(at)) {
				return
			}
			for i, s := range ColdSizes {
				r, err := b.runVictim(cctx, fmt.Sprintf("cold%dm", s>>20), c, workload.Spec{Op: workload.OpRead,
					Path: b.cold[i], DropCache: true, BlockSize: 1 << 20})
				if err == nil && r.Bytes != s {
					err = fmt.Errorf("moved %d bytes", r.Bytes)
				}
				if err != nil {
					coldErr = fmt.Errorf("cold %d MiB read: %w", s>>20, err)
					return
				}
				cell.Cold[i] = append(cell.Cold[i], float64(r.Elapsed)/1e6)
			}
		}
	}()
	var light, lightSettled []float64
	var webUs []float64
	var lightUs [][]float64
	for i, v := range vs {
		r, err := b.wait(v.p)
		if err != nil {
			return cell, fmt.Errorf("victim %d: %w", i, err)
		}
		if err := b.h.Remove(v.rel); err != nil {
			return cell, err
		}
		if i == 0 {
			cell.Web, cell.WebOps = r.Latency, r.Ops
			if r.Response != nil {
				cell.WebResponse = *r.Response
			}
			cell.WebSettled = pooled(afterFirstSecond(r.Latencies, p.WebIOPS))
			webUs = r.Latencies
			continue
		}
		lightUs = append(lightUs, r.Latencies)
		light = append(light, r.Latencies...)
		lightSettled = append(lightSettled, afterFirstSecond(r.Latencies, p.LightIOPS)...)
		cell.LightOps += r.Ops
	}
	cell.Light, cell.LightSettled = pooled(light), pooled(lightSettled)
	wg.Wait()
	if coldErr != nil {
		return cell, coldErr
	}
	vEnd := time.Now()

	if stream != nil {
		r, err := b.stopLoad(ctx, stream, smp, p.After, "streamer")
		if err != nil {
			return cell, err
		}
		s := cell.Streamer
		s.Warm = smp.window(vStart.Add(-p.Warmup/2), vStart)
		s.During = smp.window(vStart, vEnd)
		s.After1 = smp.window(vEnd, vEnd.Add(time.Second))
		s.AfterRest = smp.window(vEnd.Add(time.Second), vEnd.Add(p.After))
		s.Process, s.Samples = r.BytesPerSec, smp.count()
		if err := stopRearm(); err != nil {
			return cell, err
		}
		if err := b.h.Remove(streamRel); err != nil {
			return cell, err
		}
	}
	if tl != nil {
		cell.Seconds = tl.finish(vStart, webUs, p.WebIOPS, lightUs, phases, p.LightIOPS, 3*res.Unloaded.P99)
	}
	return cell, nil
}

// lightPhases are the light tenants' start times after the web reader's:
// tenant i (from 0) at a random point of the i-th of n equal parts of
// one period (1/iops), drawn from a generator seeded by the trial, in
// ascending order. A host's tenants are independent containers, each
// checking at its own phase; started at one instant, all n would land
// at the same point of every period, and their pooled latency would be
// that of one point of the throttle's 100 ms slice (lucky or not) rather
// than of every point, as the web reader's 100/s samples.
func lightPhases(n int, iops float64, trial int) []time.Duration {
	if n <= 0 || iops <= 0 {
		return make([]time.Duration, max(n, 0))
	}
	rng := rand.New(rand.NewPCG(uint64(trial)+1, 0x6c69676874))
	period := float64(time.Second) / iops
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration((float64(i) + rng.Float64()) / float64(n) * period)
	}
	return out
}

// afterFirstSecond is a paced victim's latencies (in the order its
// requests completed) without its first second's: iops of them.
func afterFirstSecond(us []float64, iops float64) []float64 {
	return us[min(int(math.Ceil(iops)), len(us)):]
}

// pooled is the distribution of latencies (µs) by exact nearest-rank
// quantiles; zero for none.
func pooled(us []float64) workload.Latency {
	if len(us) == 0 {
		return workload.Latency{}
	}
	s := slices.Clone(us)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		return s[min(max(i, 0), len(s)-1)]
	}
	return workload.Latency{P50: q(0.5), P90: q(0.9), P99: q(0.99), P999: q(0.999), Max: s[len(s)-1]}
}

// hostCellLine is the progress line of a host cell.
func hostCellLine(c HostCell) string {
	s := fmt.Sprintf("trial %d %-10s web p99 %7.0f µs p99.9 %7.0f µs, light p99 %7.0f µs", c.Trial, c.Config, c.Web.P99, c.Web.P999, c.Light.P99)
	s += coldPart(c.Cold)
	if c.Streamer != nil {
		s += fmt.Sprintf(", streamer %.0f/%.0f/%.0f MiB/s warm/during/after", c.Streamer.Warm.Cgroup/(1<<20), c.Streamer.During.Cgroup/(1<<20), c.Streamer.AfterRest.Cgroup/(1<<20))
	}
	return s
}

// streamerSpec is the host scenario's streamer (HostPlan.Streamer).
func (b *bench) streamerSpec(name string) workload.Spec {
	s := b.neighbourSpec(SeqRead)
	if rate, depth, ok := pacedStreamer(name); ok {
		s.RateLimit, s.IODepth = rate, depth
	}
	return s
}
