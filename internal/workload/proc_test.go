package workload_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// TestMain makes this test binary double as a workload process: re-executed
// with DDISKQOS_WORKLOAD_MAIN=1, it runs workload.Main and exits.
func TestMain(m *testing.M) { testkit.Main(m, workload.MaybeRunFromEnv) }

var childEnv = []string{workload.EnvMain + "=1"}

func dataFile(t *testing.T, size int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data")
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func startChild(t *testing.T, s workload.Spec) *workload.Proc {
	t.Helper()
	args := append([]string{"--wait-stdin", "--json"}, s.Args()...)
	p, err := workload.Start(t.Context(), os.Args[0], childEnv, args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() }) // no-op once it has exited
	return p
}

func TestProcRoundTrip(t *testing.T) {
	t.Parallel()
	path := dataFile(t, 3<<20)
	p := startChild(t, workload.Spec{Path: path, Op: workload.OpRead, BlockSize: 1 << 20})
	if p.Pid() <= 0 || p.Pid() == os.Getpid() {
		t.Fatalf("child pid %d (we are %d)", p.Pid(), os.Getpid())
	}
	// The child is alive and waiting: here a test would move it into a cgroup.
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(p.Pid()))); err != nil {
		t.Fatalf("child %d not running: %v", p.Pid(), err)
	}
	before := time.Now()
	if err := p.Go(); err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if r.Op != workload.OpRead || r.Path != path || r.Bytes != 3<<20 || r.Ops != 3 || r.Elapsed <= 0 || r.Latency.Max <= 0 {
		t.Errorf("result %+v", r)
	}
	// It did no I/O before being told to go.
	if r.Start.Before(before.Add(-time.Second)) { // a second of slack for wall-clock steps
		t.Errorf("job started at %v, before Go at %v", r.Start, before)
	}
}

func TestProcWithoutGo(t *testing.T) {
	t.Parallel()
	p := startChild(t, workload.Spec{Path: dataFile(t, 4096), Op: workload.OpRead})
	if _, err := p.Wait(); !errors.Is(err, workload.ErrNoResult) {
		t.Errorf("Wait without Go: %v; want ErrNoResult", err)
	}
}

func TestProcStop(t *testing.T) {
	t.Parallel()
	// Streams forever, slowly, until stopped.
	p := startChild(t, workload.Spec{Path: dataFile(t, 1<<20), Op: workload.OpRead, BlockSize: 4096, Loop: true, RateLimit: 1 << 20})
	if err := p.Go(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	r, err := p.Wait()
	if err != nil {
		t.Fatalf("Wait after Stop: %v", err)
	}
	if r.Bytes != r.Ops*4096 {
		t.Errorf("partial result %+v", r)
	}
}

func TestProcKill(t *testing.T) {
	t.Parallel()
	p := startChild(t, workload.Spec{Path: dataFile(t, 4096), Op: workload.OpRead, Loop: true})
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Errorf("Wait after Kill: %v; want an error saying killed", err)
	}
}

func TestStartErrors(t *testing.T) {
	t.Parallel()
	// The child refuses its arguments before printing "ready": Start says why.
	_, err := workload.Start(t.Context(), os.Args[0], childEnv, []string{"--wait-stdin", "--json", "--bs", "huge", "read", "x"})
	if err == nil || !strings.Contains(err.Error(), `invalid value "huge" for flag --bs`) {
		t.Errorf("Start with a bad flag: %v; want the child's message", err)
	}
	_, err = workload.Start(t.Context(), os.Args[0], childEnv, []string{"--json", "read", "x"})
	if err == nil || !strings.Contains(err.Error(), "lack --wait-stdin") {
		t.Errorf("Start without --wait-stdin: %v", err)
	}
	_, err = workload.Start(t.Context(), filepath.Join(t.TempDir(), "missing"), nil, []string{"--wait-stdin", "--json"})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Start of a missing binary: %v; want ErrNotExist", err)
	}
}

// TestRunIn: the process is placed (here: its pid recorded, and it is
// alive and has not read yet) before it is told to go, and its result is
// returned; a place that fails ends it, with place's error.
func TestRunIn(t *testing.T) {
	t.Parallel()
	path := dataFile(t, 2<<20)
	args := append([]string{"--wait-stdin", "--json"}, workload.Spec{Path: path, Op: workload.OpRead, BlockSize: 1 << 20}.Args()...)
	placed := 0
	r, err := workload.RunIn(t.Context(), os.Args[0], childEnv, args, func(pid int) error {
		if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
			return err
		}
		placed = pid
		return nil
	})
	if err != nil || placed <= 0 || r.Bytes != 2<<20 {
		t.Fatalf("RunIn: placed pid %d, result %+v, %v; want a pid and 2 MiB read", placed, r, err)
	}
	refuse := errors.New("no cgroup for you")
	var pid int
	_, err = workload.RunIn(t.Context(), os.Args[0], childEnv, args, func(p int) error { pid = p; return refuse })
	if !errors.Is(err, refuse) {
		t.Fatalf("place failed: %v, want its error", err)
	}
	if _, serr := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); serr == nil {
		t.Fatalf("process %d still exists after a failed place", pid)
	}
	// No place: it runs where it was started.
	p, err := workload.StartIn(t.Context(), os.Args[0], childEnv, args, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := p.Wait(); err != nil || r.Bytes != 2<<20 {
		t.Fatalf("StartIn without place: %+v, %v; want 2 MiB read", r, err)
	}
}
