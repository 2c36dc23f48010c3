package paper

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/bench/containers"
	"github.com/ddiskqos/ddiskqos/internal/bench/volume"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// Options configure a run.
type Options struct {
	Plan Plan
	// VolumeSize overrides Plan.VolumeSize() when > 0.
	VolumeSize int64
	// Exe is the running binary (os.Executable): used for the image when
	// it is a static ddiskqos, else one is built from the module source.
	Exe    string
	Docker *client.Client
	Roots  host.Roots
	// Progress gets one line per step; nil discards.
	Progress io.Writer
	// Command is the command line, recorded in the report.
	Command string
}

// Sample is one measured read.
type Sample struct {
	Trial    int     `json:"trial"`
	Config   string  `json:"config"`
	Scenario string  `json:"scenario"` // table3, table5, interactive
	Reader   string  `json:"reader"`   // "1MiB", "2MiB@2s", "4k-rand"
	Bytes    int64   `json:"bytes"`
	Seconds  float64 `json:"seconds"`
	// Latency is the per-request latency (interactive only), µs.
	Latency *workload.Latency `json:"latency_us,omitempty"`
	Start   time.Time         `json:"start"`
	End     time.Time         `json:"end"`
	// Daemon is what the daemon had decided for the reader when it was
	// released (ddiskqos and paper only).
	Daemon string `json:"daemon,omitempty"`
}

// Phase is one configuration in one trial.
type Phase struct {
	Trial     int    `json:"trial"`
	Config    string `json:"config"`
	Scheduler string `json:"scheduler"`
	// Bulk throughput, bytes/s: while foreground readers (Table 3 and 5)
	// were reading, while only the bulk container ran (quiet, or the whole
	// measurement for solo).
	BulkContentionBps  float64 `json:"bulk_contention_bps,omitempty"`
	BulkContentionSecs float64 `json:"bulk_contention_seconds,omitempty"`
	BulkQuietBps       float64 `json:"bulk_quiet_bps,omitempty"`
	// CPUSeconds is this process's CPU (user+system) during the phase: the
	// bench's own bookkeeping plus, for ddiskqos and paper, the daemon.
	CPUSeconds  float64      `json:"cpu_seconds"`
	WallSeconds float64      `json:"wall_seconds"`
	Daemon      *DaemonStats `json:"daemon,omitempty"`
}

// Result is a whole run: the JSON report.
type Result struct {
	Command string    `json:"command"`
	Started time.Time `json:"started"`
	Took    float64   `json:"took_seconds"`
	Machine Machine   `json:"machine"`
	Plan    Plan      `json:"plan"`
	Samples []Sample  `json:"samples"`
	Phases  []Phase   `json:"phases"`
	Image   string    `json:"image_binary"`
	// Revision is the commit the running binary (and so the in-process
	// daemon) was built from, "+dirty" when the tree had changes.
	Revision string   `json:"revision"`
	Notes    []string `json:"notes,omitempty"`
}

// Machine is where it ran.
type Machine struct {
	Kernel           string `json:"kernel"`
	CPUs             int    `json:"cpus"`
	MemoryMiB        int64  `json:"memory_mib"`
	Docker           string `json:"docker"`
	CgroupMode       string `json:"cgroup_mode"`
	Device           string `json:"device"`
	DefaultScheduler string `json:"default_scheduler"`
	Backing          string `json:"backing"`
}

// bench is one run in progress.
type bench struct {
	o     Options
	p     Plan
	ctx   context.Context
	vol   *volume.Volume
	h     cgroupfs.Hierarchy
	r     *containers.Runner
	run   string
	files map[string]string // name -> path in the container
	res   *Result
	log   *slog.Logger
	seq   int
}

const mountIn = "/data"

func (b *bench) say(format string, a ...any) {
	if b.o.Progress != nil {
		fmt.Fprintf(b.o.Progress, "bench paper: "+format+"\n", a...)
	}
}

// Run runs the whole benchmark and tears everything down, also when ctx is
// cancelled or a step fails; the result holds what was measured until then.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	started := time.Now()
	res = &Result{Command: o.Command, Started: started, Plan: o.Plan}
	if o.Roots.Sys == "" {
		o.Roots = host.Roots{Sys: "/sys", Proc: "/proc"}
	}
	if os.Geteuid() != 0 {
		return res, errors.New("needs root: loop devices, mounts and cgroup files")
	}
	if err := volume.CheckTools(); err != nil {
		return res, err
	}
	b := &bench{o: o, p: o.Plan, ctx: ctx, res: res, files: map[string]string{},
		run: fmt.Sprintf("%d-%d", os.Getpid(), started.UnixNano()),
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	defer func() { res.Took = time.Since(started).Seconds() }()

	layout, err := host.Layout(o.Roots)
	if err != nil {
		return res, err
	}
	if b.h, err = layout.IOHierarchy(); err != nil {
		return res, err
	}
	ver, err := o.Docker.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		return res, fmt.Errorf("docker engine: %w", err)
	}
	res.Machine = machine(ver.Version, string(layout.Mode))

	b.say("building the image's static binary")
	bin, origin, err := containers.Binary(ctx, o.Exe)
	if err != nil {
		return res, err
	}
	res.Image = origin
	res.Revision = revision(ctx)
	tag := "ddiskqos-bench:paper-" + b.run
	if err := containers.ImportImage(ctx, o.Docker, tag, bin); err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, containers.RemoveImage(context.Background(), o.Docker, tag)) }()
	b.r = containers.NewRunner(o.Docker, tag, map[string]string{LabelRun: b.run})
	defer func() { err = errors.Join(err, b.r.Close()) }()

	size := o.VolumeSize
	if size <= 0 {
		size = b.p.VolumeSize()
	}
	if need := b.p.FilesBytes() + b.p.FilesBytes()/20 + 64*mib; size < need {
		return res, fmt.Errorf("--size %d MiB is too small for the files (%d MiB): want at least %d MiB", size>>20, b.p.FilesBytes()>>20, need>>20)
	}
	b.say("volume: loop device over a %d MiB file in /var/tmp, ext4", size>>20)
	if b.vol, err = volume.Create(ctx, volume.Options{Size: size, Sys: o.Roots.Sys}); err != nil {
		return res, err
	}
	// The volume goes after the containers (deferred later = runs earlier).
	defer func() { err = errors.Join(err, b.r.Close(), b.vol.Close()) }()
	res.Machine.Device = b.vol.Name
	res.Machine.DefaultScheduler = b.vol.DefaultScheduler
	res.Machine.Backing = b.vol.Backing
	if err := b.writeFiles(); err != nil {
		return res, err
	}
	for t := 1; t <= b.p.Trials; t++ {
		for _, c := range b.p.Configs {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			b.say("trial %d/%d: %s", t, b.p.Trials, c)
			if err := b.phase(t, c); err != nil {
				return res, fmt.Errorf("trial %d, %s: %w", t, c, err)
			}
		}
	}
	return res, nil
}

func machine(docker, mode string) Machine {
	m := Machine{CPUs: runtime.NumCPU(), Docker: docker, CgroupMode: mode}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemoryMiB = int64(si.Totalram) * int64(si.Unit) >> 20
	}
	return m
}

func (b *bench) writeFiles() error {
	write := func(name string, size int64) error {
		if _, err := b.vol.WriteFile(b.ctx, name, size); err != nil {
			return err
		}
		b.files[name] = mountIn + "/" + name
		return nil
	}
	b.say("writing files: bulk %d MiB, Table 3 %v, Table 5 readers", b.p.BulkFile>>20, b.p.Sizes)
	if err := write("bulk", b.p.BulkFile); err != nil {
		return err
	}
	for _, s := range b.p.Sizes {
		if err := write("t3-"+sizeLabel(s), s); err != nil {
			return err
		}
	}
	for i, r := range b.p.Table5 {
		if err := write(fmt.Sprintf("t5-%d-%s", i, sizeLabel(r.Size)), r.Size); err != nil {
			return err
		}
	}
	return nil
}

// setup is a configuration's scheduler, daemon and weights.
type setup struct {
	sched  string // "" = the device's default
	daemon *policy.Config
	static bool
	bulk   bool
	small  bool
}

func setupOf(c string) setup {
	switch c {
	case CfgIdle:
		return setup{small: true}
	case CfgSolo:
		return setup{bulk: true}
	case CfgOriginal:
		return setup{bulk: true, small: true}
	case CfgBFQ:
		return setup{sched: "bfq", bulk: true, small: true}
	case CfgStatic:
		return setup{sched: "bfq", static: true, bulk: true, small: true}
	case CfgDdiskqos:
		pc := policy.DefaultConfig()
		return setup{daemon: &pc, bulk: true, small: true}
	case CfgPaper:
		pc := PaperPolicy()
		return setup{sched: "bfq", daemon: &pc, bulk: true, small: true}
	}
	return setup{}
}

// Weights "static" writes by hand, as --blkio-weight would if dockerd
// applied it on this kernel.
const (
	staticSmall = 1000
	staticBulk  = 100
)

func cpuNow() float64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// phase runs one configuration of one trial.
func (b *bench) phase(trial int, cfg string) (err error) {
	s := setupOf(cfg)
	ph := Phase{Trial: trial, Config: cfg}
	cpu0, wall0 := cpuNow(), time.Now()
	sched := s.sched
	if sched == "" {
		sched = b.vol.DefaultScheduler
	}
	if err := b.vol.SetScheduler(sched); err != nil {
		return err
	}
	ph.Scheduler = sched
	var d *runningDaemon
	if s.daemon != nil {
		if d, err = startDaemon(b.ctx, b.o.Docker, b.o.Roots, b.vol.Name, b.run, *s.daemon, b.log); err != nil {
			return err
		}
		defer func() {
			st, serr := d.stop()
			ph.Daemon = &st
			b.finish(&ph, cpu0, wall0)
			err = errors.Join(err, serr)
		}()
	} else {
		defer b.finish(&ph, cpu0, wall0)
	}
	pc := phaseCtx{b: b, trial: trial, cfg: cfg, s: s, d: d}

	if cfg == CfgSolo {
		bulk, smp, err := pc.startBulk("bulk")
		if err != nil {
			return err
		}
		defer pc.remove(bulk)
		defer smp.stop()
		if err := sleep(b.ctx, b.p.Warm); err != nil {
			return err
		}
		t0 := time.Now()
		if err := sleep(b.ctx, b.p.Solo); err != nil {
			return err
		}
		smp.stop()
		by, secs := smp.bytesIn([]window{{t0, time.Now()}})
		ph.BulkQuietBps = by / secs
		return smp.err
	}

	// Table 3, interactive and quiet, with one bulk container.
	var smp *sampler
	var bulk *containers.Container
	var windows []window
	if s.bulk {
		bulk, smp, err = pc.startBulk("bulk")
		if err != nil {
			return err
		}
		defer pc.remove(bulk)
		defer smp.stop()
		if err := sleep(b.ctx, b.p.Warm-b.p.Gate); err != nil {
			return err
		}
	}
	for rep := 0; rep < b.p.Reps; rep++ {
		for _, size := range b.p.Sizes {
			name := "t3-" + sizeLabel(size)
			smpl, err := pc.gatedRead(name, "table3", sizeLabel(size),
				[]string{"workload", "--wait-stdin", "--json", "--drop-cache", "read", b.files[name]})
			if err != nil {
				return err
			}
			windows = append(windows, window{smpl.Start, smpl.End})
		}
	}
	_, err = pc.gatedRead("interactive", "interactive", "4k-rand",
		[]string{"workload", "--wait-stdin", "--json", "--direct", "--bs", "4k", "--rate", fmt.Sprint(b.p.InteractiveRate),
			"--duration", b.p.Interactive.String(), "randread", b.files["bulk"]})
	if err != nil {
		return err
	}
	if s.bulk {
		if err := sleep(b.ctx, b.p.QuietSettle); err != nil {
			return err
		}
		t0 := time.Now()
		if err := sleep(b.ctx, b.p.QuietMeasure); err != nil {
			return err
		}
		smp.stop()
		by, secs := smp.bytesIn([]window{{t0, time.Now()}})
		ph.BulkQuietBps = by / secs
		pc.remove(bulk)
		if smp.err != nil {
			return smp.err
		}
	}

	// Table 5: readers released 2, 2, 3, 4, 4 s after a fresh bulk container.
	w5, smp5, err := pc.table5()
	if err != nil {
		return err
	}
	if s.bulk {
		by, secs := smp.bytesIn(windows)
		by5, secs5 := smp5.bytesIn(w5)
		ph.BulkContentionSecs = secs + secs5
		if ph.BulkContentionSecs > 0 {
			ph.BulkContentionBps = (by + by5) / ph.BulkContentionSecs
		}
		return smp5.err
	}
	return nil
}

func (b *bench) finish(ph *Phase, cpu0 float64, wall0 time.Time) {
	ph.CPUSeconds = cpuNow() - cpu0
	ph.WallSeconds = time.Since(wall0).Seconds()
	b.res.Phases = append(b.res.Phases, *ph)
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// phaseCtx is what the steps of one phase share.
type phaseCtx struct {
	b     *bench
	trial int
	cfg   string
	s     setup
	d     *runningDaemon
}

func (pc phaseCtx) name(what string) string {
	pc.b.seq++
	return fmt.Sprintf("ddiskqos-bench-%s-t%d-%s-%s-%d", pc.b.run, pc.trial, pc.cfg, what, pc.b.seq)
}

func (pc phaseCtx) spec(what string, args []string, gated bool) containers.Spec {
	return containers.Spec{Name: pc.name(what), Args: args, Gated: gated,
		Binds: map[string]string{pc.b.vol.Mount: mountIn}}
}

func (pc phaseCtx) remove(c *containers.Container) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Remove(ctx)
}

// cgroup returns the container's cgroup in the I/O hierarchy.
func (pc phaseCtx) cgroup(c *containers.Container) (string, error) {
	ctrl := "blkio"
	if pc.b.h.Version == 2 {
		ctrl = ""
	}
	return containers.CgroupOf(pc.b.o.Roots.Proc, c.Pid, ctrl)
}

func (pc phaseCtx) setWeight(c *containers.Container, w cgroupfs.Weight) error {
	cg, err := pc.cgroup(c)
	if err != nil {
		return err
	}
	kind := cgroupfs.WeightBFQ
	return pc.b.h.SetDeviceWeight(cg, kind, pc.b.vol.Dev, w)
}

// startBulk starts a container streaming the bulk file with O_DIRECT, over
// and over, and a sampler of its cgroup's reads.
func (pc phaseCtx) startBulk(what string) (*containers.Container, *sampler, error) {
	b := pc.b
	c, err := b.r.Start(b.ctx, pc.spec(what, []string{"workload", "--direct", "--loop", "read", b.files["bulk"]}, false))
	if err != nil {
		return nil, nil, err
	}
	pc.d.markBulk(c.ID)
	if pc.s.static {
		if err := pc.setWeight(c, staticBulk); err != nil {
			pc.remove(c)
			return nil, nil, err
		}
	}
	cg, err := pc.cgroup(c)
	if err != nil {
		pc.remove(c)
		return nil, nil, fmt.Errorf("bulk container: %w (logs: %s)", err, c.Stderr())
	}
	smp, err := startSampler(b.ctx, b.h, cg, b.vol.Dev, 2*time.Millisecond)
	if err != nil {
		pc.remove(c)
		return nil, nil, err
	}
	return c, smp, nil
}

// prepare starts a gated reader and, under static, gives it its weight.
func (pc phaseCtx) prepare(what string, args []string) (*containers.Container, error) {
	c, err := pc.b.r.Start(pc.b.ctx, pc.spec(what, args, true))
	if err != nil {
		return nil, err
	}
	if pc.s.static {
		if err := pc.setWeight(c, staticSmall); err != nil {
			pc.remove(c)
			return nil, err
		}
	}
	return c, nil
}

// collect waits for a released reader and turns its result into a Sample.
func (pc phaseCtx) collect(c *containers.Container, scenario, reader, daemonView string) (Sample, error) {
	defer pc.remove(c)
	ctx, cancel := context.WithTimeout(pc.b.ctx, 5*time.Minute)
	defer cancel()
	code, out, err := c.Wait(ctx)
	if err != nil {
		return Sample{}, err
	}
	if code != 0 {
		return Sample{}, fmt.Errorf("container %s exited %d: %s%s", c.Name, code, out, c.Stderr())
	}
	var r workload.Result
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		return Sample{}, fmt.Errorf("container %s: result %q: %w", c.Name, out, err)
	}
	s := Sample{Trial: pc.trial, Config: pc.cfg, Scenario: scenario, Reader: reader, Bytes: r.Bytes,
		Seconds: r.Elapsed.Seconds(), Start: r.Start, End: r.End, Daemon: daemonView}
	if scenario == "interactive" {
		l := r.Latency
		s.Latency = &l
	}
	pc.b.res.Samples = append(pc.b.res.Samples, s)
	return s, nil
}

// gatedRead starts a reader, holds it for the gate, releases it and
// waits for its result.
func (pc phaseCtx) gatedRead(what, scenario, reader string, args []string) (Sample, error) {
	c, err := pc.prepare(what, args)
	if err != nil {
		return Sample{}, err
	}
	if err := sleep(pc.b.ctx, pc.b.p.Gate); err != nil {
		pc.remove(c)
		return Sample{}, err
	}
	view := pc.d.view(c.ID)
	if err := c.Release(); err != nil {
		pc.remove(c)
		return Sample{}, err
	}
	return pc.collect(c, scenario, reader, view)
}

// table5 runs the paper's second experiment: the readers are started
// (gated) first, then a fresh bulk container, then each reader is
// released at its time after the bulk container's start.
func (pc phaseCtx) table5() ([]window, *sampler, error) {
	b := pc.b
	var readers []*containers.Container
	defer func() {
		for _, c := range readers {
			if c != nil {
				pc.remove(c)
			}
		}
	}()
	for i, r := range b.p.Table5 {
		name := fmt.Sprintf("t5-%d-%s", i, sizeLabel(r.Size))
		c, err := pc.prepare("t5", []string{"workload", "--wait-stdin", "--json", "--drop-cache", "read", b.files[name]})
		if err != nil {
			return nil, nil, err
		}
		readers = append(readers, c)
	}
	var smp *sampler
	t0 := time.Now()
	if pc.s.bulk {
		bulk, sm, err := pc.startBulk("bulk5")
		if err != nil {
			return nil, nil, err
		}
		defer pc.remove(bulk)
		defer sm.stop()
		smp = sm
		t0 = time.Now()
	}
	views := make([]string, len(readers))
	for i, r := range b.p.Table5 {
		if err := sleep(b.ctx, time.Until(t0.Add(r.At))); err != nil {
			return nil, nil, err
		}
		views[i] = pc.d.view(readers[i].ID)
		if err := readers[i].Release(); err != nil {
			return nil, nil, err
		}
	}
	var ws []window
	for i, r := range b.p.Table5 {
		c := readers[i]
		readers[i] = nil // collect removes it
		s, err := pc.collect(c, "table5", r.Label(), views[i])
		if err != nil {
			return nil, nil, err
		}
		ws = append(ws, window{s.Start, s.End})
	}
	if smp != nil {
		smp.stop() // before the deferred removal of its cgroup
	}
	return ws, smp, nil
}

// revision is the commit this binary was built from: the VCS stamp of a
// `go build`, else (test binaries carry none) the module checkout's HEAD.
func revision(ctx context.Context) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
		if rev != "" {
			return rev[:min(12, len(rev))] + dirty
		}
	}
	root, err := containers.ModuleRoot(ctx)
	if err != nil {
		return "unknown"
	}
	out, err := exec.CommandContext(ctx, "git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown (no VCS stamp, no git checkout)"
	}
	rev := strings.TrimSpace(string(out))
	if st, err := exec.CommandContext(ctx, "git", "-C", root, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(bytes.TrimSpace(st)) > 0 {
		rev += "+dirty"
	}
	return rev
}
