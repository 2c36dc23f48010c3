package main

// Docker on a pure cgroup-v2 host: the engine (dockerd, containerd, runc:
// this machine's own binaries, seen through the VM's read-only /usr) runs
// inside the test VM with the cgroupfs driver on cgroup2, the image is the
// test binary alone (docker import, FROM scratch), and `ddiskqos run
// --source docker` — this package's main, the same code as the binary —
// demotes the streaming container, leaves the idle one at level 1 and puts
// back every value it changed on SIGTERM.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/containers"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// asMain is the name under which the test binary is ddiskqos itself (see
// TestMain): the image's entrypoint /ddiskqos and the daemon started below.
const asMain = "ddiskqos"

// EnvV2DockerFull selects the full Docker-on-v2 run (make test-v2-docker-full):
// the default thresholds, so the streamer walks all four levels on its own
// bytes. The short run (make test) gives the daemon thresholds of a few MiB.
const EnvV2DockerFull = "DDISKQOS_V2_DOCKER_FULL"

func TestVMDockerV2(t *testing.T) {
	if !testkit.InVM() {
		t.Skip("Docker on cgroup v2 runs inside the test VM, outside make test until it has passed there: make test-v2-docker-full")
	}
	testkit.NeedRoot(t)
	full := os.Getenv(EnvV2DockerFull) == "1"
	begin := time.Now()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	static, err := containers.IsStatic(exe)
	testkit.Need(t, err == nil && static, "test binary %s is the image's only file and must be static (CGO_ENABLED=0): static=%v %v", exe, static, err)
	disk := os.Getenv("DDISKQOS_VM_DISK")
	testkit.Need(t, disk != "", "DDISKQOS_VM_DISK not set")
	devName := filepath.Base(disk)
	testkit.SetScheduler(t, devName, "bfq")
	devText, err := os.ReadFile(filepath.Join("/sys/block", devName, "dev"))
	if err != nil {
		t.Fatal(err)
	}
	dev, err := cgroupfs.ParseDev(strings.TrimSpace(string(devText)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	h := cgroupfs.Hierarchy{Version: 2, Mount: l.Unified}
	testkit.Need(t, l.Unified != "" && len(l.V1) == 0, "not a pure cgroup-v2 host: layout %s", l.Mode)

	e := dockertest.StartEngine(t)
	c := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.CgroupVersion != "2" || info.CgroupDriver != "cgroupfs" {
		t.Fatalf("engine reports cgroup version %q driver %q, want 2 and cgroupfs", info.CgroupVersion, info.CgroupDriver)
	}
	t.Logf("engine %s up (cgroup v%s, %s driver, %s storage) %s after the test began",
		info.ServerVersion, info.CgroupVersion, info.CgroupDriver, info.Driver, time.Since(begin).Round(time.Millisecond))

	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	tag := "ddiskqos-test:v2"
	if err := containers.ImportImage(ctx, c, tag, bin); err != nil {
		t.Fatal(err) // the image goes with the engine's data root
	}
	t.Logf("imported %s (%d bytes) %s after the test began", tag, len(bin), time.Since(begin).Round(time.Millisecond))

	// The streamer reads the disk passed in with O_DIRECT until stopped;
	// the idle one makes one 4 KiB read of its own binary (page cache, no
	// disk I/O) an hour. Both get an engine-set blkio weight: an original
	// value the daemon must put back.
	stream := dockertest.RunContainer(t, c, dockertest.RunOptions{Image: tag, Name: "streamer", BlkioWeight: 300,
		Args:    []string{"workload", "--direct", "--loop", "--bs", "256KiB", "--duration", "30m", "read", disk},
		Devices: []dockertest.Device{{Host: disk}}})
	idle := dockertest.RunContainer(t, c, dockertest.RunOptions{Image: tag, Name: "idle", BlkioWeight: 200,
		Args: []string{"workload", "--rate", "1", "--bs", "4KiB", "--duration", "30m", "read", "/" + asMain}})
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
	t.Logf("containers running %s after the test began: streamer %s, idle %s", time.Since(begin).Round(time.Millisecond), streamCg, idleCg)

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
	origStream, origIdle := read(streamCg), read(idleCg)
	if !strings.Contains(origStream["io.bfq.weight"], "default 300") {
		t.Fatalf("engine did not set the streamer's weight: io.bfq.weight %q", origStream["io.bfq.weight"])
	}
	weight := func(cg string) (uint64, bool) {
		t.Helper()
		w, err := h.ReadWeights(cg, cgroupfs.WeightBFQ)
		if err != nil {
			t.Fatal(err)
		}
		return w.Device(dev)
	}

	// The daemon: this test binary as ddiskqos.
	addr := freeAddr(t)
	args := []string{"run", "--source", "docker", "--docker-host", e.Host(), "--interval", "250ms", "--boost-after", "1h",
		"--listen", addr, "--state-file", filepath.Join(t.TempDir(), "state.json"), "--devices", devName, "--log-level", "debug"}
	if !full {
		args = append(args, "--thresholds", "1MiB,2MiB,4MiB,8MiB")
	}
	d := exec.Command(exe, args...)
	d.Args[0] = asMain
	d.Env = append(os.Environ(), "DDISKQOS_LOCK_FILE="+filepath.Join(t.TempDir(), "ddiskqos.lock"))
	logs := &lockedBuffer{}
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
	r := &runRig{addr: addr}
	wait := func(what string, cond func(s *snapshot.Snapshot) bool) *snapshot.Snapshot {
		t.Helper()
		deadline := time.Now().Add(5 * time.Minute)
		var last *snapshot.Snapshot
		for time.Now().Before(deadline) {
			if s, err := r.snapshot(); err == nil {
				last = s
				if cond(s) {
					return s
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("timed out waiting for %s; last snapshot %+v", what, last)
		return nil
	}
	level := func(s *snapshot.Snapshot, name string) int {
		for _, w := range s.Workloads {
			if w.Name == name {
				return w.Level
			}
		}
		return 0
	}
	started := time.Now()
	wait("both containers tracked", func(s *snapshot.Snapshot) bool {
		return level(s, "streamer") != 0 && level(s, "idle") != 0
	})
	t.Logf("daemon tracks both containers %s after it started", time.Since(started).Round(time.Millisecond))
	s := wait("streamer demoted to level 4", func(s *snapshot.Snapshot) bool { return level(s, "streamer") == 4 })
	t.Logf("streamer at level 4 %s after the daemon started", time.Since(started).Round(time.Millisecond))
	if lv := level(s, "idle"); lv != 1 {
		t.Fatalf("idle container at level %d, want 1", lv)
	}
	// The daemon applies a level's weight in the tick that decides it;
	// read them back from the kernel.
	deadline := time.Now().Add(time.Minute)
	for {
		ws, _ := weight(streamCg)
		wi, _ := weight(idleCg)
		if ws == cgroupfs.NativeWeight(cgroupfs.WeightBFQ, 100) && wi == cgroupfs.NativeWeight(cgroupfs.WeightBFQ, 1000) {
			t.Logf("read back: streamer %s io.bfq.weight %d:%d %d, idle %d", streamCg, dev.Major, dev.Minor, ws, wi)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("weights read back: streamer %d (want %d), idle %d (want %d)", ws,
				cgroupfs.NativeWeight(cgroupfs.WeightBFQ, 100), wi, cgroupfs.NativeWeight(cgroupfs.WeightBFQ, 1000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	s, err = r.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if lv := level(s, "idle"); lv != 1 {
		t.Fatalf("idle container at level %d at the end, want 1", lv)
	}
	for _, w := range s.Workloads {
		t.Logf("workload %s: level %d, read %d bytes, cgroup %s", w.Name, w.Level, w.ReadBytes, w.Cgroup)
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
		if _, ok := weight(cg); ok {
			t.Errorf("%s keeps a per-device weight after the daemon exited", name)
		}
	}
	t.Logf("originals restored; whole test %s (full=%v)", time.Since(begin).Round(time.Millisecond), full)
}
