package cgroupfs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseBlockStat(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		want     BlockStat
		err      string
	}{
		{name: "17 fields", in: "  1000 5 8000 300 2000 7 16000 900 3 1200 4500 0 0 0 0 10 20\n",
			want: BlockStat{ReadIOs: 1000, ReadSectors: 8000, ReadTicksMs: 300, WriteIOs: 2000, WriteSectors: 16000, InFlight: 3, IOTicksMs: 1200, TimeInQueueMs: 4500}},
		{name: "11 fields", in: "1 0 8 0 2 0 16 0 0 5 9",
			want: BlockStat{ReadIOs: 1, ReadSectors: 8, WriteIOs: 2, WriteSectors: 16, IOTicksMs: 5, TimeInQueueMs: 9}},
		{name: "10 fields", in: "1 0 8 0 2 0 16 0 0 5\n", err: "10 fields"},
		{name: "not a number", in: "1 0 8 0 2 0 16 0 x 5 9", err: "field 9"},
		{name: "overflow", in: "99999999999999999999999 0 8 0 2 0 16 0 0 5 9", err: "out of range"},
		{name: "empty", in: "", err: "0 fields"},
	} {
		got, err := ParseBlockStat([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v %v, want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestParseTaskState(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want byte
		err  bool
	}{
		{in: "1234 (dd) D 1 1234 1234 0 -1 4194560 ...", want: 'D'},
		{in: "77 (kworker/u30:2) I 2 0 0 0", want: 'I'},
		{in: "9 (a) b) (c) S 1 2", want: 'S'}, // comm with ") " inside
		{in: "9 (x)", err: true},
		{in: "9 x S 1", err: true},
		{in: "9 (x) 1 2", err: true},
		{in: "", err: true},
	} {
		got, err := ParseTaskState([]byte(tc.in))
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("%q: %q %v, want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestParseProcsBlocked(t *testing.T) {
	t.Parallel()
	in := "cpu  1 2 3\nintr 5 6\nctxt 99\nprocs_running 3\nprocs_blocked 17\nsoftirq 1\n"
	if n, err := ParseProcsBlocked([]byte(in)); err != nil || n != 17 {
		t.Errorf("got %d %v, want 17", n, err)
	}
	if _, err := ParseProcsBlocked([]byte("cpu 1\n")); err == nil || !strings.Contains(err.Error(), "no procs_blocked") {
		t.Errorf("missing line: %v", err)
	}
	if _, err := ParseProcsBlocked([]byte("procs_blocked -1\n")); err == nil || !strings.Contains(err.Error(), "not a count") {
		t.Errorf("bad count: %v", err)
	}
}

// TestProcStat: the kept /proc/stat reads this host's file again at every
// call; a file longer than the first buffer is read whole; a missing file
// and a closed one are errors that name the file.
func TestProcStat(t *testing.T) {
	t.Parallel()
	ps, err := OpenProcStat("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := ps.ProcsBlocked(); err != nil {
			t.Fatalf("this host's /proc/stat: %v", err)
		}
	}
	if err := ps.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.ProcsBlocked(); err == nil || !strings.Contains(err.Error(), "/proc/stat") {
		t.Errorf("read after close: %v, want an error naming /proc/stat", err)
	}

	dir := t.TempDir()
	long := "cpu  1 2 3\nintr " + strings.Repeat("0 ", 10000) + "\nprocs_running 1\nprocs_blocked 23\n"
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(long), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err = OpenProcStat(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	if n, err := ps.ProcsBlocked(); err != nil || n != 23 {
		t.Errorf("a %d-byte stat: %d, %v; want 23", len(long), n, err)
	}
	if _, err := OpenProcStat(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "nope/stat") {
		t.Errorf("missing: %v, want an error naming nope/stat", err)
	}
}

// TestCountDStateTree counts over a fake cgroup and proc tree: tasks in D,
// one that exited (no stat), the cap.
func TestCountDStateTree(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	proc := filepath.Join(root, "proc")
	cg := filepath.Join(root, "cg")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(cg, 0o755))
	must(os.WriteFile(filepath.Join(cg, "cgroup.threads"), []byte("10\n11\n12\n13\n"), 0o644))
	for tid, st := range map[string]string{"10": "10 (dd) D 1", "11": "11 (sh) S 1", "13": "13 (kworker) D 2"} {
		must(os.MkdirAll(filepath.Join(proc, tid), 0o755))
		must(os.WriteFile(filepath.Join(proc, tid, "stat"), []byte(st), 0o644))
	}
	c := &Cgroup{h: Hierarchy{Version: 2, Mount: root}, rel: "/cg"}
	tc, _, err := c.CountDState(proc, 100, nil)
	if err != nil || tc != (TaskCount{D: 2, Seen: 3}) {
		t.Errorf("got %+v %v, want 2 D of 3 seen", tc, err)
	}
	tc, _, err = c.CountDState(proc, 1, nil)
	if err != nil || tc != (TaskCount{D: 1, Seen: 1, Capped: true}) {
		t.Errorf("capped: got %+v %v", tc, err)
	}
	must(os.WriteFile(filepath.Join(cg, "cgroup.threads"), []byte("10\nabc\n"), 0o644))
	if _, _, err := c.CountDState(proc, 100, nil); err == nil || !strings.Contains(err.Error(), `"abc"`) {
		t.Errorf("bad listing: %v", err)
	}
	gone := &Cgroup{h: Hierarchy{Version: 1, Mount: root}, rel: "/gone"}
	if _, _, err := gone.CountDState(proc, 100, nil); err == nil {
		t.Error("missing cgroup: no error")
	}
}

// BenchmarkCountDState: one workload's D-state count, the health stage's
// per-workload cost: here the benchmark's own cgroup (all its threads).
func BenchmarkCountDState(b *testing.B) {
	l, err := DetectLayout("/proc/self/mountinfo")
	if err != nil {
		b.Skip(err)
	}
	h, err := l.IOHierarchy()
	if err != nil {
		b.Skip(err)
	}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		b.Skip(err)
	}
	lines, err := ParseProcCgroup(f)
	f.Close()
	if err != nil {
		b.Fatal(err)
	}
	rel := ""
	for _, ln := range lines {
		if (h.Version == 2 && ln.ID == 0) || (h.Version == 1 && slices.Contains(ln.Controllers, "blkio")) {
			rel = ln.Path
		}
	}
	c, err := h.Open(rel)
	if err != nil {
		b.Skip(err)
	}
	defer c.Close()
	var buf []byte
	seen := 0
	for b.Loop() {
		tc, nb, err := c.CountDState("/proc", 256, buf)
		if err != nil {
			b.Fatal(err)
		}
		buf, seen = nb, tc.Seen
	}
	b.ReportMetric(float64(seen), "tasks")
}

// BenchmarkProcsBlocked: the host-wide count, once per tick.
func BenchmarkProcsBlocked(b *testing.B) {
	ps, err := OpenProcStat("/proc")
	if err != nil {
		b.Fatal(err)
	}
	defer ps.Close()
	for b.Loop() {
		if _, err := ps.ProcsBlocked(); err != nil {
			b.Fatal(err)
		}
	}
}
