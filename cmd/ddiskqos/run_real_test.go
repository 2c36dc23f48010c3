package main

// The daemon as an operator runs it: the real binary, real cgroups, a real
// loop device with BFQ, signals. `--source cgroup` on a parent cgroup of
// the test's own (the Docker-sourced proof lives in internal/daemon).

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// The binary the real tests run, built once per test process (TestMain
// removes binDir).
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// buildBinary compiles this command once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "ddiskqos-bin-"); binErr != nil {
			return
		}
		bin := filepath.Join(binDir, "ddiskqos")
		if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		binPath = bin
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

type runRig struct {
	bin, addr, state string
	lock             string
	h                cgroupfs.Hierarchy
	parent           string
	loop             testkit.Loop
	dev              cgroupfs.Dev
	// noBFQ: the kernel has no bfq, so the loop device was left on its
	// own scheduler and the daemon shapes it with the throttle's caps
	// alone; a test of weights skips at its first weight (setWeight,
	// weight). False for every rig on bfq, the VM's among them.
	noBFQ bool
}

func newRunRig(t *testing.T) *runRig {
	t.Helper()
	if testkit.InVM() {
		t.Skip("host v1 test")
	}
	testkit.NeedRoot(t)
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := l.V1Controller("blkio")
	testkit.Need(t, ok, "cgroup v1 blkio hierarchy not mounted (layout %s)", l.Mode)
	r := &runRig{bin: buildBinary(t), addr: testkit.FreeAddr(t), state: filepath.Join(t.TempDir(), "state.json"),
		h: cgroupfs.Hierarchy{Version: 1, Mount: m.Mountpoint}, parent: fmt.Sprintf("/ddiskqos-test-run-%d", os.Getpid())}
	r.lock = filepath.Join(t.TempDir(), "ddiskqos.lock")
	r.loop = testkit.LoopDevice(t, 512)
	r.noBFQ = !testkit.PreferBFQ(t, r.loop.Name)
	r.dev = cgroupfs.Dev{Major: r.loop.Major, Minor: r.loop.Minor}
	p, _ := r.h.Path(r.parent)
	testkit.Cgroup(t, p)
	return r
}

// env is the daemon's environment: the host lock in the rig's own temp
// dir, so tests on one host do not refuse each other's daemons.
func (r *runRig) env() []string {
	return append(os.Environ(), "DDISKQOS_LOCK_FILE="+r.lock)
}

func (r *runRig) child(t *testing.T, name string) string {
	rel := r.parent + "/" + name
	p, _ := r.h.Path(rel)
	testkit.Cgroup(t, p)
	return rel
}

// launch runs the binary with args and the rig's environment in the
// background, killed when the test ends; its log is kept for the test to
// read and goes to the test log when the test fails.
func (r *runRig) launch(t *testing.T, args ...string) (*exec.Cmd, *testkit.SyncBuffer) {
	t.Helper()
	cmd := exec.Command(r.bin, args...)
	cmd.Env = r.env()
	logs := &testkit.SyncBuffer{}
	cmd.Stderr = logs
	// A test binary killed (go test's timeout, ^C) runs no Cleanup: the
	// kernel sends the daemon SIGTERM when the thread that started it goes,
	// and it restores and exits as on any stop, instead of running on with
	// its caps in force. The thread is held until the test ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := testkit.StartHeld(t, cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	return cmd, logs
}

// serve launches `ddiskqos run` with its defaults on the rig's parent and
// loop device, API on, state in a temporary file, and the extra flags;
// it returns once the API answers.
func (r *runRig) serve(t *testing.T, extra ...string) (*exec.Cmd, *testkit.SyncBuffer) {
	t.Helper()
	d, logs := r.launch(t, append([]string{"run", "--source", "cgroup", "--cgroup-parent", r.parent, "--devices", r.loop.Name,
		"--listen", r.addr, "--state-file", filepath.Join(t.TempDir(), "state.json")}, extra...)...)
	deadline := time.Now().Add(30 * time.Second)
	for _, err := r.snapshot(); err != nil; _, err = r.snapshot() {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon's API did not answer within 30 s: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return d, logs
}

// start runs `ddiskqos run` on the rig's parent and loop device in the
// background; logs go to the test log.
func (r *runRig) start(t *testing.T, extra ...string) *exec.Cmd {
	t.Helper()
	// --policy paper: these tests are about the mechanics of levels
	// (bytes → level, boost, weights, restore), which the paper's rule
	// makes a function of bytes alone; the default recent rule has its own
	// test (TestRealRunRecentPolicy).
	cmd, _ := r.launch(t, append([]string{"run", "--source", "cgroup", "--cgroup-parent", r.parent, "--policy", "paper",
		"--interval", "100ms", "--boost-after", "3s", "--listen", r.addr, "--state-file", r.state,
		"--devices", r.loop.Name, "--log-level", "debug"}, extra...)...)
	return cmd
}

func (r *runRig) snapshot() (*snapshot.Snapshot, error) {
	c, err := api.NewClient(r.addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Workloads(ctx, nil)
}

func (r *runRig) waitLevel(t *testing.T, name string, level int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var last *snapshot.Snapshot
	for time.Now().Before(deadline) {
		s, err := r.snapshot()
		if err == nil {
			last = s
			for _, w := range s.Workloads {
				if w.Name == name && w.Level == level {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never reached level %d; last snapshot %+v", name, level, last)
}

// ownWeight writes an operator's own bfq weight w for the rig's loop device
// into the cgroup directory dir (what the daemon must put back), when the
// device is on bfq; without bfq there is none to write (the rig's caps
// alone are then the operator's).
func (r *runRig) ownWeight(dir string, w int) error {
	if r.noBFQ {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, "blkio.bfq.weight_device"), []byte(fmt.Sprintf("%s %d", r.loop.Dev(), w)), 0)
}

// setWeight writes bfq weight v into cgroup cg for the rig's loop device
// (an operator's own, the daemon must put back); a test of weights skips
// here without bfq.
func (r *runRig) setWeight(t *testing.T, cg, v string) error {
	t.Helper()
	if r.noBFQ {
		testkit.SkipNoBFQ(t, r.loop.Name+" left on its own scheduler")
	}
	return mech.Write(r.h, mech.BFQWeight, r.dev, cg, v)
}

func (r *runRig) weight(t *testing.T, cg string) (uint64, bool) {
	t.Helper()
	if r.noBFQ {
		testkit.SkipNoBFQ(t, r.loop.Name+" left on its own scheduler")
	}
	return realcg.Weight(t, r.h, mech.BFQWeight, r.dev, cg)
}

func (r *runRig) read(t *testing.T, cg string, n, offset int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := workload.RunIn(ctx, r.bin, nil, []string{"workload", "--wait-stdin", "--json", "--direct",
		"--bytes", fmt.Sprint(n), "--offset", fmt.Sprint(offset), "read", r.loop.Path},
		func(pid int) error { return r.h.AddProcess(cg, pid) })
	if err != nil {
		t.Fatal(err)
	}
	if res.Bytes != n {
		t.Fatalf("read %d bytes in %s, want %d", res.Bytes, cg, n)
	}
	c, err := r.h.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := c.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s raw counters, all devices, after reading %d bytes: %+v", cg, n, st.Total())
}

func stopWith(t *testing.T, cmd *exec.Cmd, sig syscall.Signal) {
	t.Helper()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if sig == syscall.SIGTERM && err != nil {
			t.Fatalf("daemon exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("daemon did not exit after %s", sig)
	}
}

func TestRealRunLevelsSignalsAndCrash(t *testing.T) {
	r := newRunRig(t)
	small, bulk := r.child(t, "small"), r.child(t, "bulk")
	if err := r.setWeight(t, small, "300"); err != nil {
		t.Fatal(err)
	}

	d := r.start(t)
	r.waitLevel(t, "small", 1)
	r.waitLevel(t, "bulk", 1)
	r.read(t, small, 3<<20, 0)
	r.waitLevel(t, "small", 2)
	if v, _ := r.weight(t, small); v != 500 {
		t.Fatalf("small at level 2 has weight %d, want 500", v)
	}
	// The loop device's I/O is charged again on the disk under its backing
	// file; the daemon counts it once.
	s, err := r.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range s.Workloads {
		if w.Name == "small" && (w.ReadBytes != 3<<20 || w.BytesInLevel != 1<<20) {
			t.Fatalf("small counted read_bytes %d, bytes_in_level %d; want 3 MiB and 1 MiB", w.ReadBytes, w.BytesInLevel)
		}
	}
	r.read(t, bulk, 300<<20, 64<<20)
	r.waitLevel(t, "bulk", 4)
	if v, _ := r.weight(t, bulk); v != 100 {
		t.Fatalf("bulk at level 4 has weight %d, want 100", v)
	}
	r.waitLevel(t, "bulk", 1) // --boost-after 3s
	if v, _ := r.weight(t, bulk); v != 1000 {
		t.Fatalf("boosted bulk has weight %d, want 1000", v)
	}

	// The operator's view.
	var out, errOut bytes.Buffer
	if code := runStatus([]string{"--addr", r.addr}, &out, &errOut); code != 0 {
		t.Fatalf("status exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"small", "bulk", r.loop.Name} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}

	// SIGTERM: every file holds its original value again.
	stopWith(t, d, syscall.SIGTERM)
	if v, ok := r.weight(t, small); !ok || v != 300 {
		t.Fatalf("after SIGTERM small weight %d (set %v), want 300", v, ok)
	}
	if v, ok := r.weight(t, bulk); ok {
		t.Fatalf("after SIGTERM bulk still has weight %d", v)
	}

	// A clean restart keeps the levels (the originals were restored).
	d = r.start(t)
	r.waitLevel(t, "small", 2)
	if v, _ := r.weight(t, small); v != 500 {
		t.Fatalf("after a clean restart small weight %d, want its level-2 500", v)
	}
	// SIGKILL leaves ddiskqos values behind; a restart restores them on exit.
	r.read(t, small, 12<<20, 0)
	r.waitLevel(t, "small", 3)
	stopWith(t, d, syscall.SIGKILL)
	if v, _ := r.weight(t, small); v != 250 {
		t.Fatalf("after SIGKILL small weight %d, want the level-3 value 250 left behind", v)
	}
	d = r.start(t)
	r.waitLevel(t, "small", 3) // the level survived the crash
	stopWith(t, d, syscall.SIGTERM)
	if v, ok := r.weight(t, small); !ok || v != 300 {
		t.Fatalf("after crash, restart and SIGTERM small weight %d (set %v), want 300", v, ok)
	}
	if v, ok := r.weight(t, bulk); ok {
		t.Fatalf("after crash, restart and SIGTERM bulk still has weight %d", v)
	}
}

// TestRealRunReloadOnHUP: SIGHUP applies new weights from the config file
// at once; a broken file is refused and the running configuration kept.
func TestRealRunReloadOnHUP(t *testing.T) {
	r := newRunRig(t)
	small := r.child(t, "small")
	conf := filepath.Join(t.TempDir(), "ddiskqos.yaml")
	write := func(body string) {
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("weights: [1000, 500, 250, 100]\n")
	d := r.start(t, "--config", conf)
	r.waitLevel(t, "small", 1)
	r.read(t, small, 3<<20, 0)
	r.waitLevel(t, "small", 2)
	waitWeight := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if v, _ := r.weight(t, small); v == want {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		v, _ := r.weight(t, small)
		t.Fatalf("small weight %d, want %d", v, want)
	}
	waitWeight(500)

	write("weights: [1000, 400, 200, 100]\n")
	if err := d.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitWeight(400)

	write("weights: [1000, 400, 200, 100]\nbogus_key: 1\n")
	if err := d.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if _, err := r.snapshot(); err != nil {
		t.Fatalf("daemon gone after a broken reload: %v", err)
	}
	if v, _ := r.weight(t, small); v != 400 {
		t.Fatalf("a refused reload changed the weight to %d", v)
	}
	stopWith(t, d, syscall.SIGTERM)
	if v, ok := r.weight(t, small); ok {
		t.Fatalf("after SIGTERM small still has weight %d", v)
	}
}

func TestRunUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--interval", "1ms"},
		{"--weights", "1000,500"},
		{"--source", "cgroup"}, // no --cgroup-parent
		{"--bogus"},
	} {
		var out, errOut bytes.Buffer
		if code := runDaemon(args, &out, &errOut); code != 2 {
			t.Errorf("run %q: exit %d, want 2; stderr %q", args, code, errOut.String())
		}
		if errOut.Len() == 0 {
			t.Errorf("run %q: no message", args)
		}
	}
}
