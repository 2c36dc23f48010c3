package paper

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/bench/containers"
	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/bench/volume"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
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
	// Build is the running binary's own build (and so the in-process
	// daemon's), report.Binary.
	Build report.Build `json:"build"`
	Notes []string     `json:"notes,omitempty"`
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
	if host.BuiltWithoutBFQ(o.Roots) {
		// bfq, static and paper run on it (the paper's blkio weights are
		// bfq's under v1): refused before anything is made.
		return res, fmt.Errorf("this kernel is built without bfq (%s/config.gz: CONFIG_IOSCHED_BFQ is not set), and the paper's bench compares bfq's weights (configurations %s, %s, %s): `bench contention --scenario host` needs no bfq",
			o.Roots.Proc, CfgBFQ, CfgStatic, CfgPaper)
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
	res.Build = report.Binary()
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
