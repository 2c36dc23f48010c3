package main

// Docker on a pure cgroup-v2 host: the engine (dockerd, containerd, runc:
// this machine's own binaries, seen through the VM's read-only /usr) runs
// inside the test VM with the cgroupfs driver on cgroup2, the image is the
// test binary alone (docker import, FROM scratch), and `ddiskqos run
// --source docker` — this package's main, the same code as the binary —
// demotes the streaming container level by level (its io.bfq.weight read
// back from the kernel), caps it in io.max while a better level reads the
// same disk, leaves the idle container at level 1 and never caps it, and
// puts back every value it changed on SIGTERM.
//
// TestRealV2DockerShort runs in make test (test-v2): thresholds of 16 to
// 128 MiB and a 250 ms tick. TestVMDockerV2 is the same run with the daemon's
// default thresholds and tick (make test-v2-docker-full).

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/bench/containers"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// asMain is the name under which the test binary is ddiskqos itself (see
// TestMain): the image's entrypoint /ddiskqos and the daemon started below.
const asMain = "ddiskqos"

// EnvDockerProfile=1 makes the Docker-on-v2 tests log the engine's whole
// log (containerd's plugin loads and dockerd's start-up steps, each with
// its time) even when they pass: the start-up profile.
const EnvDockerProfile = "DDISKQOS_DOCKER_PROFILE"

// dockerV2Run is one variant of the Docker-on-v2 run.
type dockerV2Run struct {
	name       string
	thresholds string // --thresholds; "": the daemon's defaults (2, 8, 32, 128 MiB)
	interval   string // --interval
}

// The streamer reads as fast as the disk lets it (qemu caps it at
// 100 MiB/s): the throttle caps only a heavy workload (internal/throttle's
// load rule, 5 % of the capacity it measured), and a paced one is heavy or
// light by what the capacity estimate made of the disk. Paced at 2 MiB/s
// (so that each level lasted a few ticks), it was heavy beside a capacity
// measured from its own few requests, and light, never capped, in the
// runs where the device's rate while busy (~100 MiB/s) set the capacity:
// the test's one failure in the make test of 2026-12-07, and 2 of ~7
// runs before. Short's thresholds are a few ticks of the disk's rate
// (16 MiB at level 1 is ~0.16 s), so the kernel still shows most levels'
// weights; full's are the daemon's defaults, passed within a tick or two.
var (
	dockerV2Short = dockerV2Run{name: "short", thresholds: "16MiB,32MiB,64MiB,128MiB", interval: "250ms"}
	dockerV2Full  = dockerV2Run{name: "full", interval: "1s"}
)

func TestRealV2DockerShort(t *testing.T) {
	testkit.VMOnly(t)
	dockerV2(t, dockerV2Short)
}

func TestVMDockerV2(t *testing.T) {
	if !testkit.InVM() {
		t.Skip("the full Docker-on-v2 run is inside the test VM: make test-v2-docker-full")
	}
	dockerV2(t, dockerV2Full)
}

// phases logs how long each step took, and all of them at the end.
type phases struct {
	t           *testing.T
	begin, last time.Time
	rows        []string
}

func newPhases(t *testing.T) *phases {
	now := time.Now()
	return &phases{t: t, begin: now, last: now}
}

func (p *phases) mark(what string) {
	p.t.Helper()
	now := time.Now()
	row := fmt.Sprintf("%-44s %9s  (at %s)", what, now.Sub(p.last).Round(time.Millisecond), now.Sub(p.begin).Round(time.Millisecond))
	p.rows = append(p.rows, row)
	p.last = now
	p.t.Logf("phase: %s", row)
}

func (p *phases) table() string { return strings.Join(p.rows, "\n") }

// knobWatch polls the streamer's and the idle container's weight and
// io.max on the disk every 20 ms and keeps each distinct value in the
// order seen.
type knobWatch struct {
	h    cgroupfs.Hierarchy
	dev  cgroupfs.Dev
	cgs  map[string]string // name -> cgroup
	stop chan struct{}
	done chan struct{}

	mu     sync.Mutex
	weight map[string][]uint64 // 0: no per-device weight
	limits map[string][]cgroupfs.Limits
	errs   []error
}

func watchKnobs(h cgroupfs.Hierarchy, dev cgroupfs.Dev, cgs map[string]string) *knobWatch {
	w := &knobWatch{h: h, dev: dev, cgs: cgs, stop: make(chan struct{}), done: make(chan struct{}),
		weight: map[string][]uint64{}, limits: map[string][]cgroupfs.Limits{}}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			w.poll()
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *knobWatch) poll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, cg := range w.cgs {
		v, err := bfqWeight(w.h, w.dev, cg)
		if err != nil {
			w.errs = append(w.errs, err)
			continue
		}
		if s := w.weight[name]; len(s) == 0 || s[len(s)-1] != v {
			w.weight[name] = append(s, v)
		}
		l, err := w.h.ReadLimits(cg, w.dev)
		if err != nil {
			w.errs = append(w.errs, err)
			continue
		}
		if s := w.limits[name]; len(s) == 0 || s[len(s)-1] != l {
			w.limits[name] = append(s, l)
		}
	}
}

// Stop ends the polling and returns what was seen.
func (w *knobWatch) Stop() (weight map[string][]uint64, limits map[string][]cgroupfs.Limits, errs []error) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.weight, w.limits, w.errs
}

// capped reports whether the watcher has seen a limit on name's cgroup.
func (w *knobWatch) capped(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.limits[name], func(l cgroupfs.Limits) bool { return !l.IsZero() })
}

// logField is one key=value of a log line in slog's text format.
var logField = regexp.MustCompile(`(\w+)=("(?:[^"\\]|\\.)*"|\S+)`)

// transitions returns "FROM>TO reason" of every level change the daemon
// logged (slog's text format) for the workload name.
func transitions(log, name string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="level change"`) {
			continue
		}
		f := map[string]string{}
		for _, m := range logField.FindAllStringSubmatch(line, -1) {
			v := m[2]
			if uq, err := strconv.Unquote(v); err == nil {
				v = uq
			}
			f[m[1]] = v
		}
		if f["workload"] == name {
			out = append(out, f["from"]+">"+f["to"]+" "+f["reason"])
		}
	}
	return out
}

func dockerV2(t *testing.T, run dockerV2Run) {
	testkit.NeedRoot(t)
	ph := newPhases(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	static, err := containers.IsStatic(exe)
	testkit.Need(t, err == nil && static, "test binary %s is the image's only file and must be static (CGO_ENABLED=0): static=%v %v", exe, static, err)
	vd := testkit.VMDisk(t)
	disk, devName, dev := vd.Path, vd.Name, cgroupfs.Dev{Major: vd.Major, Minor: vd.Minor}
	testkit.SetScheduler(t, devName, "bfq")
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h := cgroupfs.Hierarchy{Version: 2, Mount: l.Unified}
	testkit.Need(t, l.Unified != "" && len(l.V1) == 0, "not a pure cgroup-v2 host: layout %s", l.Mode)
	bfq := func(w cgroupfs.Weight) uint64 { return realcg.Native(t, mech.BFQWeight, w) }

	// The engine.
	e := dockertest.StartEngine(t)
	ph.mark("engine up (containerd and dockerd)")
	if os.Getenv(EnvDockerProfile) == "1" {
		t.Cleanup(func() { t.Logf("engine log:\n%s", e.Log()) })
	}
	c := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ir, err := c.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info := ir.Info
	if info.CgroupVersion != "2" || info.CgroupDriver != "cgroupfs" {
		t.Fatalf("engine reports cgroup version %q driver %q, want 2 and cgroupfs", info.CgroupVersion, info.CgroupDriver)
	}
	t.Logf("engine %s: cgroup v%s, %s driver, %s storage, %d CPUs, %d MiB, kernel %s",
		info.ServerVersion, info.CgroupVersion, info.CgroupDriver, info.Driver, info.NCPU, info.MemTotal>>20, info.KernelVersion)

	// The image: this binary, FROM scratch.
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	tag := "ddiskqos-test:v2"
	if err := containers.ImportImage(ctx, c, tag, bin); err != nil {
		t.Fatal(err) // the image goes with the engine's data root
	}
	ph.mark(fmt.Sprintf("image imported (%d MiB)", len(bin)>>20))

	// The daemon, this test binary as ddiskqos, starts before the
	// containers, as on a host where containers come and go. Its start
	// overlaps theirs: a container its first listing of the engine
	// finds is found running (its I/O counts from that first look), one
	// started after that listing is new (from its first byte). Either
	// way the streamer reads on and goes down the levels.
	addr := testkit.FreeAddr(t)
	args := []string{"run", "--source", "docker", "--docker-host", e.Host(), "--interval", run.interval, "--policy", "paper", "--boost-after", "1h",
		"--listen", addr, "--state-file", filepath.Join(t.TempDir(), "state.json"), "--devices", devName, "--log-level", "debug"}
	if run.thresholds != "" {
		args = append(args, "--thresholds", run.thresholds)
	}
	d := exec.Command(exe, args...)
	d.Args[0] = asMain
	d.Env = append(os.Environ(), "DDISKQOS_LOCK_FILE="+filepath.Join(t.TempDir(), "ddiskqos.lock"))
	logs := &testkit.SyncBuffer{}
	d.Stderr = logs
	if err := d.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if d.ProcessState == nil {
			d.Process.Kill()
			d.Wait()
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})

	// The streamer reads the disk passed in with O_DIRECT until stopped,
	// unpaced (see dockerV2Short); the idle one would make one 4 KiB read
	// of its own binary (page cache, no disk I/O) every 68 minutes (--rate
	// 1 byte/s). Both get an engine-set blkio weight: an original value
	// the daemon must put back.
	// Neither needs a network: without a namespace of their own they
	// start without dockerd re-executing itself twice each.
	ct := dockertest.RunContainers(t, c,
		dockertest.RunOptions{Image: tag, Name: "streamer", BlkioWeight: 300, NetworkDisabled: true,
			Args:    []string{"workload", "--direct", "--loop", "--bs", "256KiB", "--duration", "30m", "read", disk},
			Devices: []dockertest.Device{{Host: disk}}},
		dockertest.RunOptions{Image: tag, Name: "idle", BlkioWeight: 200, NetworkDisabled: true,
			Args: []string{"workload", "--rate", "1", "--bs", "4KiB", "--duration", "30m", "read", "/" + asMain}})
	stream, idle := ct[0], ct[1]
	ph.mark("containers created, then started together")
	cgroupOf := func(id string) string {
		t.Helper()
		pid := dockertest.WaitRunning(t, c, id, 5*time.Minute)
		p, err := containers.CgroupOf("/proc", pid, "")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(p, id) {
			t.Fatalf("container %.12s runs in cgroup %s", id, p)
		}
		return p
	}
	streamCg, idleCg := cgroupOf(stream.ID), cgroupOf(idle.ID)
	ph.mark("both containers running")
	t.Logf("streamer %s, idle %s; %s", streamCg, idleCg, vmMemory())

	files := []string{"io.bfq.weight", "io.max"}
	read := func(cg string) map[string]string {
		t.Helper()
		m := map[string]string{}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(l.Unified, cg, f))
			if err != nil {
				t.Fatal(err)
			}
			m[f] = string(b)
		}
		return m
	}
	// The originals are what the engine wrote: its blkio weight as BFQ's
	// default, no limit. The daemon may have added its per-device weight
	// by now, never before the engine's line.
	origStream := map[string]string{"io.bfq.weight": "default 300\n", "io.max": ""}
	origIdle := map[string]string{"io.bfq.weight": "default 200\n", "io.max": ""}
	if ws, wi := read(streamCg)["io.bfq.weight"], read(idleCg)["io.bfq.weight"]; !strings.HasPrefix(ws, origStream["io.bfq.weight"]) || !strings.HasPrefix(wi, origIdle["io.bfq.weight"]) {
		t.Fatalf("engine did not set the weights: streamer io.bfq.weight %q, idle %q", ws, wi)
	}
	watch := watchKnobs(h, dev, map[string]string{"streamer": streamCg, "idle": idleCg})
	watching := true
	t.Cleanup(func() {
		if watching {
			watch.Stop()
		}
	})

	r := &runRig{addr: addr}
	wait := func(what string, within time.Duration, cond func(s *snapshot.Snapshot) bool) *snapshot.Snapshot {
		t.Helper()
		deadline := time.Now().Add(within)
		var last *snapshot.Snapshot
		for time.Now().Before(deadline) {
			if s, err := r.snapshot(); err == nil {
				last = s
				if cond(s) {
					return s
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("timed out after %s waiting for %s; last snapshot %+v", within, what, last)
		return nil
	}
	find := func(s *snapshot.Snapshot, name string) *snapshot.Workload {
		for _, w := range s.Workloads {
			if w.Name == name {
				return w
			}
		}
		return &snapshot.Workload{}
	}
	level := func(s *snapshot.Snapshot, name string) int { return find(s, name).Level }

	// Bounds: generous, for an emulated VM on a loaded machine; the
	// phases say what it took.
	wait("both containers tracked", 5*time.Minute, func(s *snapshot.Snapshot) bool {
		return level(s, "streamer") != 0 && level(s, "idle") != 0
	})
	ph.mark("daemon answers and tracks both containers")
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(line, "initial listing of the workload source complete") {
			t.Logf("daemon: %s", line) // how long after its start the engine's first listing came
		}
	}
	var seen []int // the streamer's levels, in the order the API showed them
	s := wait("streamer demoted to level 4", 5*time.Minute, func(s *snapshot.Snapshot) bool {
		if lv := level(s, "streamer"); len(seen) == 0 || seen[len(seen)-1] != lv {
			seen = append(seen, lv)
		}
		return level(s, "streamer") == 4
	})
	ph.mark("streamer at level 4")
	if lv := level(s, "idle"); lv != 1 {
		t.Fatalf("idle container at level %d, want 1", lv)
	}
	// The daemon applies a level's weight in the tick that decides it;
	// read the last one back from the kernel.
	deadline := time.Now().Add(time.Minute)
	for {
		vs, _ := bfqWeight(h, dev, streamCg)
		vi, _ := bfqWeight(h, dev, idleCg)
		if vs == bfq(100) && vi == bfq(1000) {
			t.Logf("read back: streamer io.bfq.weight %d:%d %d, idle %d", dev.Major, dev.Minor, vs, vi)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("weights read back: streamer %d (want %d), idle %d (want %d)", vs, bfq(100), vi, bfq(1000))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ph.mark("level-4 weight read back")

	// io.max: while a better level reads the same disk, the daemon's
	// throttle (beside BFQ's weights) caps the level-4 streamer; within
	// its hold after that reader stops, it lifts the cap. The better
	// level is a reader in a cgroup of its own under the containers'
	// parent: to the throttle, I/O of the parent that no demoted
	// workload did, as a new container's before its first tick.
	probeCg := filepath.Join(e.CgroupParent(), "ddiskqos-probe")
	testkit.Cgroup(t, filepath.Join(l.Unified, probeCg))
	probe, err := workload.Start(ctx, exe, []string{workload.EnvMain + "=1"},
		[]string{"--wait-stdin", "--json", "--direct", "--bs", "4KiB", "--rate", "400KiB/s", "--duration", "10m", "read", disk})
	if err != nil {
		t.Fatal(err)
	}
	probeWaited := false
	t.Cleanup(func() {
		if !probeWaited {
			probe.Kill()
			probe.Wait()
		}
	})
	if err := h.AddProcess(probeCg, probe.Pid()); err != nil {
		t.Fatal(err)
	}
	if err := probe.Go(); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(2 * time.Minute)
	var capped cgroupfs.Limits
	var views []string // the daemon's view of the device once a second: why no cap, if none
	nextView := time.Now()
	for {
		capped, err = h.ReadLimits(streamCg, dev)
		if err != nil {
			t.Fatal(err)
		}
		if !capped.IsZero() {
			break
		}
		if time.Now().After(nextView) {
			nextView = nextView.Add(time.Second)
			views = append(views, deviceView(r, devName, "streamer"))
		}
		if time.Now().After(deadline) {
			t.Fatalf("streamer not capped in io.max within 2 min of a level-1 reader on %s; the daemon's view of it, once a second:\n%s",
				devName, strings.Join(views, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	ph.mark("streamer capped in io.max (better level reads)")
	t.Logf("the daemon's view as the cap came: %s", deviceView(r, devName, "streamer"))
	t.Logf("streamer io.max on %d:%d while the better level reads: rbps=%d wbps=%d riops=%d wiops=%d",
		dev.Major, dev.Minor, capped.RBps, capped.WBps, capped.RIOps, capped.WIOps)
	if err := probe.Stop(); err != nil {
		t.Fatal(err)
	}
	res, err := probe.Wait()
	probeWaited = true
	if err != nil {
		t.Fatalf("level-1 reader: %v", err)
	}
	t.Logf("level-1 reader: %d bytes in %d reads", res.Bytes, res.Ops)
	deadline = time.Now().Add(time.Minute)
	for {
		lim, err := h.ReadLimits(streamCg, dev)
		if err != nil {
			t.Fatal(err)
		}
		if lim.IsZero() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("streamer still capped (%+v) a minute after the better level stopped", lim)
		}
		time.Sleep(20 * time.Millisecond)
	}
	ph.mark("cap lifted (better level stopped)")

	s, err = r.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if lv := level(s, "idle"); lv != 1 {
		t.Fatalf("idle container at level %d at the end, want 1", lv)
	}
	for _, w := range s.Workloads {
		t.Logf("workload %s: level %d, read %d bytes, cgroup %s, applied %+v", w.Name, w.Level, w.ReadBytes, w.Cgroup, w.Applied)
	}
	weights, limits, errs := watch.Stop()
	watching = false
	if len(errs) > 0 {
		t.Fatalf("reading the containers' knobs: %v", errs[0])
	}
	t.Logf("streamer's levels as the API showed them: %v", seen)
	t.Logf("io.bfq.weight on %d:%d as the kernel showed it (0: none set): streamer %v, idle %v", dev.Major, dev.Minor, weights["streamer"], weights["idle"])
	t.Logf("io.max on %d:%d as the kernel showed it: streamer %+v, idle %+v", dev.Major, dev.Minor, limits["streamer"], limits["idle"])

	// Level by level: the daemon logged 1>2, 2>3, 3>4, each for a used
	// allowance, and the kernel's weight only ever went down the levels'
	// weights, ending at level 4's.
	log := logs.String()
	if got, want := transitions(log, "streamer"), []string{"none>1 new", "1>2 allowance-used", "2>3 allowance-used", "3>4 allowance-used"}; !slices.Equal(got, want) {
		t.Errorf("streamer's level changes in the daemon log: %q, want %q", got, want)
	}
	if got, want := transitions(log, "idle"), []string{"none>1 new"}; !slices.Equal(got, want) {
		t.Errorf("idle's level changes in the daemon log: %q, want %q", got, want)
	}
	order := []uint64{0, bfq(1000), bfq(500), bfq(250), bfq(100)}
	ws := weights["streamer"]
	if !isSubsequence(ws, order) || len(ws) == 0 || ws[len(ws)-1] != bfq(100) {
		t.Errorf("streamer's io.bfq.weight went %v: want a subsequence of %v ending at %d", ws, order, bfq(100))
	}
	if wi := weights["idle"]; !isSubsequence(wi, []uint64{0, bfq(1000)}) {
		t.Errorf("idle's io.bfq.weight went %v: want only level 1's %d", wi, bfq(1000))
	}
	t.Logf("the kernel showed %d of the streamer's 4 levels' weights (a level passed within one tick is never written)",
		len(slices.DeleteFunc(slices.Clone(ws), func(v uint64) bool { return v == 0 })))
	if !watch.capped("streamer") {
		t.Errorf("the 20 ms watcher never saw the streamer's cap (the test's own reads did)")
	}
	if watch.capped("idle") {
		t.Errorf("idle was capped: io.max went %+v", limits["idle"])
	}

	// SIGTERM: every original back, byte for byte.
	if err := d.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- d.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("daemon exit after SIGTERM: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("daemon did not exit within 2 minutes of SIGTERM")
	}
	ph.mark("daemon exited on SIGTERM")
	for name, cg := range map[string]string{"streamer": streamCg, "idle": idleCg} {
		orig := origStream
		if name == "idle" {
			orig = origIdle
		}
		now := read(cg)
		for _, f := range files {
			if now[f] != orig[f] {
				t.Errorf("%s %s after the daemon exited: %q, original %q", name, f, now[f], orig[f])
			}
		}
		if _, ok := realcg.Weight(t, h, mech.BFQWeight, dev, cg); ok {
			t.Errorf("%s keeps a per-device weight after the daemon exited", name)
		}
	}
	t.Logf("%s run: originals restored; phases:\n%s", run.name, ph.table())
}

// deviceView is one line of what the daemon's API shows of device dev and
// workload name: the best level active there, the capacity the caps are
// shares of, the latency controller's state, and the workload's rate and
// what is applied to it.
func deviceView(r *runRig, dev, name string) string {
	s, err := r.snapshot()
	if err != nil {
		return "snapshot: " + err.Error()
	}
	out := ""
	for _, d := range s.Devices {
		if d.Name == dev {
			out = fmt.Sprintf("%s: top active level %d, capacity %.1f MiB/s %.0f IOPS, target %.2f ms, protected p99 %.2f ms, capped share %.3f",
				d.Name, d.TopActiveLevel, d.CapacityBps/(1<<20), d.CapacityIOPS, d.LatencyTarget*1e3, d.ProtectedP99*1e3, d.CappedShare)
		}
	}
	for _, w := range s.Workloads {
		if w.Name == name {
			out += fmt.Sprintf("; %s level %d, %.2f MiB/s, applied %+v", name, w.Level, w.ReadBps/(1<<20), w.Applied)
		}
	}
	return out
}

// isSubsequence reports whether got lists values of order in that order
// (each at most once).
func isSubsequence(got, order []uint64) bool {
	i := 0
	for _, v := range got {
		for i < len(order) && order[i] != v {
			i++
		}
		if i == len(order) {
			return false
		}
		i++
	}
	return true
}

// vmMemory says how much of the VM's memory is in use, and how much of it
// the tmpfs /tmp (the engine's data root, vfs) holds: what -mem must cover.
func vmMemory() string {
	var total, avail uint64
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		var kb uint64
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			total = kb
		}
		if _, err := fmt.Sscanf(line, "MemAvailable: %d kB", &kb); err == nil {
			avail = kb
		}
	}
	var st syscall.Statfs_t
	tmp := "unknown"
	if err := syscall.Statfs(os.TempDir(), &st); err == nil {
		tmp = fmt.Sprintf("%d MiB", (st.Blocks-st.Bfree)*uint64(st.Bsize)>>20)
	}
	return fmt.Sprintf("VM memory: %d of %d MiB in use, %s of it in %s", (total-avail)>>10, total>>10, tmp, os.TempDir())
}

// bfqWeight is cgroup cg's io.bfq.weight on dev, 0 when it has none (the
// knob watch keeps a read error instead of failing from its goroutine).
func bfqWeight(h cgroupfs.Hierarchy, dev cgroupfs.Dev, cg string) (uint64, error) {
	v, err := mech.Read(h, mech.BFQWeight, dev, cg)
	if err != nil || v == "" {
		return 0, err
	}
	return strconv.ParseUint(v, 10, 64)
}
