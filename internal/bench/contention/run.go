package contention

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/ddiskqos/ddiskqos/internal/bench/volume"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// ParentPrefix names the bench's parent cgroups; the pid of the bench
// follows, so a leftover of a killed run is recognised and removed.
const ParentPrefix = "ddiskqos-bench-contention-"

// Options configure Run.
type Options struct {
	Plan Plan
	// Exe and ExeArgs start a workload process: Exe ExeArgs... followed by
	// the workload's flags. Normally the ddiskqos binary and ["workload"];
	// a test binary with Env DDISKQOS_WORKLOAD_MAIN=1 and no ExeArgs.
	Exe     string
	ExeArgs []string
	Env     []string
	// Roots are the kernel filesystems (/sys, /proc).
	Roots host.Roots
	// Dir holds the volume's backing file; "" is /var/tmp.
	Dir string
	// Progress receives a line per phase; nil discards them.
	Progress io.Writer
	// Command is the command line, for the report.
	Command string
}

// Window is the neighbour's throughput in one window, bytes per second.
type Window struct {
	Cgroup float64 `json:"cgroup_bps"` // its cgroup's counters (what v1 charges it)
	Device float64 `json:"device_bps"` // the whole device (reads of readers, writes of writers)
}

// NeighbourStats is what the neighbour did in one cell.
type NeighbourStats struct {
	Warm   Window `json:"warm"`    // second half of the warm-up, alone
	During Window `json:"during"`  // while the victims ran
	After1 Window `json:"after_1"` // 0-1 s after the victims stopped
	After2 Window `json:"after_2"` // 1-2 s after the victims stopped
	// Process is what the process itself moved per second over its life.
	Process float64 `json:"process_bps"`
	Fsyncs  int64   `json:"fsyncs,omitempty"`
	// Cap is the fixed throttle's cap (ThrottleFixed), bytes/s.
	Cap     uint64 `json:"cap_bps,omitempty"`
	Samples int    `json:"samples"`
}

// Cell is one configuration with one neighbour in one trial.
type Cell struct {
	Trial     int       `json:"trial"`
	Config    Config    `json:"config"`
	Neighbour Neighbour `json:"neighbour,omitempty"` // "" for Idle
	Scheduler string    `json:"scheduler"`
	// Web is the web-like victim's service latency (from each request's
	// issue, as fio reports it), µs; WebResponse counts from when each
	// request was due, so a stall counts against every request behind it.
	Web         workload.Latency `json:"web_us"`
	WebResponse workload.Latency `json:"web_response_us"`
	WebOps      int64            `json:"web_ops"`
	// Cold are the cold reads' times per size (ColdSizes order), ms.
	Cold [][]float64     `json:"cold_ms"`
	NB   *NeighbourStats `json:"neighbour_stats,omitempty"`
	// Daemon is the in-process ddiskqos's view (ddiskqos configurations).
	Daemon *DaemonStats `json:"daemon,omitempty"`
	Wall   float64      `json:"wall_s"`
}

// Result is a whole run.
type Result struct {
	Command string `json:"command"`
	// Build is the binary's own build (report.Binary), set by the caller.
	Build  report.Build `json:"build"`
	Plan   Plan         `json:"plan"`
	Kernel string       `json:"kernel"`
	CPUs   int          `json:"cpus"`
	// Cgroup is the I/O hierarchy the run drove: "v1" (blkio) or "v2".
	Cgroup string `json:"cgroup"`
	// Memory says whether the memory controller was on for the run's
	// cgroups (v2: buffered writes then are charged to the writer).
	Memory bool `json:"memory_controller,omitempty"`
	// TestVM says the run was inside the test VM (DDISKQOS_IN_VM=1, set by
	// vmexec): software emulation, absolute figures are the emulator's.
	TestVM bool `json:"test_vm,omitempty"`
	// IOCost is the calibration the ddiskqos cells ran with (v2 only).
	IOCost           *IOCost `json:"iocost,omitempty"`
	Device           string  `json:"device"`
	Backing          string  `json:"backing_file"` // the loop device's file, removed at the end
	DefaultScheduler string  `json:"default_scheduler"`
	// LoadStart and LoadEnd are the host's 1-minute load average when the
	// run started and ended: other work on the host adds CPU waits.
	LoadStart string `json:"load_start"`
	LoadEnd   string `json:"load_end"`
	// Nice is the CPU priority the bench and its workloads ran at.
	Nice  int       `json:"nice"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Cells []Cell    `json:"cells"`
}

// bench is one run's state.
type bench struct {
	o      Options
	p      Plan
	h      cgroupfs.Hierarchy
	vol    *volume.Volume
	parent string // relative cgroup of the run
	files  struct{ big, web, dw, bw string }
	cold   []string
	mu     sync.Mutex       // procs and seq: the host scenario starts victims from several goroutines
	procs  []*workload.Proc // live ones, for teardown
	seq    int
	log    func(format string, a ...any)
	// v2, ddiskqos: the calibrated iocost and where the values it
	// replaces are kept while it is on.
	costModel   cgroupfs.CostModel
	costQoS     cgroupfs.CostQoS
	iocostState string
}

// Run runs the plan. The result so far is returned with any error.
func Run(ctx context.Context, o Options) (res *Result, err error) {
	if o.Exe == "" {
		return nil, errors.New("contention: no workload executable")
	}
	if o.Roots.Sys == "" {
		o.Roots = host.Roots{Sys: "/sys", Proc: "/proc"}
	}
	if err := noBFQ(o.Roots, o.Plan.Configs, ""); err != nil {
		return nil, err
	}
	b := &bench{o: o, p: o.Plan}
	b.log = func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "bench contention: "+format+"\n", a...)
		}
	}
	res = &Result{Command: o.Command, Plan: o.Plan, CPUs: runtime.NumCPU(), Start: time.Now(), LoadStart: loadAvg(o.Roots.Proc),
		TestVM: os.Getenv("DDISKQOS_IN_VM") == "1"}
	defer func() {
		if terr := b.teardown(); terr != nil {
			err = errors.Join(err, fmt.Errorf("teardown: %w", terr))
		}
		res.End, res.LoadEnd = time.Now(), loadAvg(o.Roots.Proc)
	}()
	m, err := b.open(ctx, o.Roots, o.Dir)
	res.Kernel, res.Cgroup, res.Nice, res.Memory = m.kernel, m.cgroup, m.nice, m.memory
	res.Device, res.DefaultScheduler, res.Backing = m.device, m.defaultScheduler, m.backing
	if err != nil {
		return res, err
	}
	if b.h.Version == 2 && slices.Contains(b.p.Configs, DDiskQoS) {
		if b.iocostState, err = os.MkdirTemp("", "ddiskqos-bench-iocost-"); err != nil {
			return res, err
		}
		if res.IOCost, b.costModel, b.costQoS, err = calibrateTwin(ctx, b.h, o.Roots.Sys, cmpOr(o.Dir, "/var/tmp"), b.vol.Dev, b.log); err != nil {
			return res, fmt.Errorf("calibrate iocost: %w", err)
		}
	}
	// Let the host finish writing what setting up wrote before the first
	// cell measures anything.
	syscall.Sync()
	if !sleepCtx(ctx, 2*time.Second) {
		return res, ctx.Err()
	}
	b.log("device %s (default scheduler %s), %d trials × %d neighbours × %d configurations",
		b.vol.Name, b.vol.DefaultScheduler, b.p.Trials, len(b.p.Neighbours), len(b.p.Configs))

	for t := range b.p.Trials {
		for _, c := range b.p.Configs {
			nbs := b.p.Neighbours
			if c.idle() {
				nbs = []Neighbour{""}
			}
			for _, nb := range nbs {
				if err := ctx.Err(); err != nil {
					return res, err
				}
				cell, err := b.cell(ctx, res, t, c, nb)
				if err != nil {
					return res, fmt.Errorf("trial %d, %s, %s: %w", t+1, c, cmpOr(string(nb), "no neighbour"), err)
				}
				res.Cells = append(res.Cells, cell)
				b.log("%s", cellLine(cell))
			}
		}
	}
	return res, nil
}

// Nice is the CPU priority Run gives itself and so its workloads: on a
// host busy with other work the victims' latency must be the disk's, not
// the CPU run queue's. Neighbours and victims get the same priority.
const Nice = -10

// raisePriority sets every thread of this process to nice n (Linux nice
// values are per thread; threads and processes started later inherit it
// from the thread that starts them). It returns the nice value of the
// main thread afterwards.
func raisePriority(n int) int {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, n)
		}
	}
	// getpriority(2) returns 20-nice through the raw syscall.
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}

// loadAvg is the 1-minute load average, "" when unknown.
func loadAvg(proc string) string {
	b, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return ""
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func utsString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// writeFiles writes the files the workloads read; the writers' files are
// made (and allocated) by their first pass.
func (b *bench) writeFiles(ctx context.Context) error {
	var err error
	b.log("writing %d MiB for the readers", (b.p.BigFile+b.p.WebFile)>>20)
	if b.files.big, err = b.vol.WriteFile(ctx, "big", b.p.BigFile); err != nil {
		return err
	}
	if b.files.web, err = b.vol.WriteFile(ctx, "web", b.p.WebFile); err != nil {
		return err
	}
	for _, s := range ColdSizes {
		f, err := b.vol.WriteFile(ctx, fmt.Sprintf("cold-%dMiB", s>>20), s)
		if err != nil {
			return err
		}
		b.cold = append(b.cold, f)
	}
	b.files.dw = filepath.Join(b.vol.Mount, "direct-writer")
	b.files.bw = filepath.Join(b.vol.Mount, "buffered-writer")
	return nil
}

// scheduler of a configuration.
func (b *bench) scheduler(c Config) string {
	if c.bfq() {
		return "bfq"
	}
	return b.vol.DefaultScheduler
}

// cgroup makes a new child cgroup of the run named after what runs in it.
func (b *bench) cgroup(name string) (string, error) {
	b.mu.Lock()
	b.seq++
	rel := fmt.Sprintf("%s/%s-%d", b.parent, name, b.seq)
	b.mu.Unlock()
	_, err := b.h.Create(rel)
	return rel, err
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// machine is what a run records of the machine it prepared.
type machine struct {
	kernel, cgroup                    string
	nice                              int
	memory                            bool // v2: memory enabled for the children
	device, defaultScheduler, backing string
}

// open prepares a run, for both scenarios: it reads the kernel and the I/O
// hierarchy, raises the bench's priority, removes what a killed run left,
// makes the run's parent cgroup (with the v2 controllers on for its
// children), and creates the volume, its files written. What it made is
// undone by teardown, also after an error; what it found so far is
// returned with the error.
func (b *bench) open(ctx context.Context, roots host.Roots, dir string) (m machine, err error) {
	var uts syscall.Utsname
	if syscall.Uname(&uts) == nil {
		m.kernel = utsString(uts.Release[:])
	}
	layout, err := host.Layout(roots)
	if err != nil {
		return m, err
	}
	if b.h, err = layout.IOHierarchy(); err != nil {
		return m, err
	}
	m.cgroup = fmt.Sprintf("v%d", b.h.Version)
	if b.h.Version != 1 && b.h.Version != 2 {
		return m, fmt.Errorf("cgroup v%d at %s: want v1 blkio or v2", b.h.Version, b.h.Mount)
	}
	m.nice = raisePriority(Nice)
	removeStale(b.h.Mount)
	b.parent = "/" + ParentPrefix + strconv.Itoa(os.Getpid())
	if _, err := b.h.Create(b.parent); err != nil {
		return m, err
	}
	if b.h.Version == 2 {
		if m.memory, err = enableV2Controllers(b.h, b.parent); err != nil {
			return m, err
		}
	}
	b.log("creating a %d MiB volume", b.p.VolumeSize()>>20)
	if b.vol, err = volume.Create(ctx, volume.Options{Dir: dir, Size: b.p.VolumeSize(), Sys: roots.Sys, AllowTmpfs: b.p.AllowTmpfs, NoLoop: b.p.NoLoop}); err != nil {
		return m, err
	}
	m.device, m.defaultScheduler, m.backing = b.vol.Name, b.vol.DefaultScheduler, b.vol.Backing
	if err := b.h.EnableV1Accounting(b.vol.Dev); err != nil {
		return m, fmt.Errorf("enable v1 accounting on %s: %w", b.vol.Name, err)
	}
	return m, b.writeFiles(ctx)
}

// teardown stops every process, removes the run's cgroups and the volume.
func (b *bench) teardown() error {
	var errs []error
	for _, p := range b.procs {
		_ = p.Kill()
		_, _ = p.Wait()
	}
	b.procs = nil
	if b.parent != "" {
		if dir, err := b.h.Path(b.parent); err == nil {
			if err := cgroupfs.RemoveTree(dir); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if b.vol != nil {
		if err := b.vol.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if b.iocostState != "" {
		if err := os.RemoveAll(b.iocostState); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeStale removes the parents a bench killed with SIGKILL left behind
// (their pid is gone). Best effort.
func removeStale(mount string) {
	ents, _ := os.ReadDir(mount)
	for _, e := range ents {
		pid, ok := strings.CutPrefix(e.Name(), ParentPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(pid); err == nil && syscall.Kill(n, 0) == nil {
			continue
		}
		_ = cgroupfs.RemoveTree(filepath.Join(mount, e.Name()))
	}
}

// noBFQ is the error of a plan that needs bfq (configurations cs, or the
// host scenario's --scheduler bfq: sched) on a kernel built without it
// (host.BuiltWithoutBFQ); nil when none does or the kernel has it.
func noBFQ(r host.Roots, cs []Config, sched string) error {
	var need []string
	for _, c := range cs {
		if c.bfq() {
			need = append(need, string(c))
		}
	}
	if sched == "bfq" {
		need = append(need, "--scheduler bfq")
	}
	if len(need) == 0 || !host.BuiltWithoutBFQ(r) {
		return nil
	}
	hint := "the host scenario without it needs no bfq"
	if sched == "" {
		hint = "the cell scenario always measures idle-bfq; --scenario host needs no bfq"
	}
	return fmt.Errorf("this kernel is built without bfq (%s/config.gz: CONFIG_IOSCHED_BFQ is not set), and %s run on it: %s",
		r.Proc, strings.Join(need, ", "), hint)
}
