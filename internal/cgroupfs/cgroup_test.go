package cgroupfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// fakeCgroup writes files into a directory standing in for a cgroup.
func fakeCgroup(t *testing.T, root, rel string, files map[string]string) {
	t.Helper()
	dir := filepath.Join(root, rel)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestOpenReadV1PrefersThrottleRecursive(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fakeCgroup(t, root, "docker/abc", map[string]string{
		"blkio.throttle.io_service_bytes_recursive": blkioBytes,
		"blkio.throttle.io_serviced_recursive":      blkioIOs,
		"blkio.throttle.io_service_bytes":           "Total 0\n",
		"blkio.bfq.io_service_bytes_recursive":      "Total 0\n",
	})
	h := Hierarchy{Version: 1, Mount: root}
	c, err := h.Open("/docker/abc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.StatFile() != "blkio.throttle.io_service_bytes_recursive" {
		t.Fatalf("StatFile = %s", c.StatFile())
	}
	for i := 0; i < 2; i++ { // the second read re-reads the kept descriptors
		s, err := c.ReadIO()
		if err != nil {
			t.Fatal(err)
		}
		d, ok := s.Device(Dev{7, 0})
		if !ok || d.RBytes != 4096 || d.WBytes != 8192 || d.RIOs != 1 || d.WIOs != 2 {
			t.Fatalf("read %d: 7:0 = %+v", i, d)
		}
	}
	if _, err := c.ReadPressure(); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("v1 pressure: %v, want ErrNotAvailable", err)
	}
	// The kept descriptor sees new content without reopening.
	if err := os.WriteFile(filepath.Join(root, "docker/abc/blkio.throttle.io_service_bytes_recursive"), []byte("7:0 Read 1\nTotal 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := c.ReadIO()
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := s.Device(Dev{7, 0}); d.RBytes != 1 {
		t.Fatalf("after rewrite 7:0 = %+v", d)
	}
}

func TestOpenV2AndPressure(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fakeCgroup(t, root, "a", map[string]string{
		"io.stat":     "254:0 rbytes=10 wbytes=20 rios=1 wios=2 dbytes=0 dios=0\n",
		"io.pressure": "some avg10=0.00 avg60=0.00 avg300=0.00 total=5\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=3\n",
	})
	fakeCgroup(t, root, "nopsi", map[string]string{"io.stat": ""})
	fakeCgroup(t, root, "noio", map[string]string{"cgroup.procs": ""})
	h := Hierarchy{Version: 2, Mount: root}
	c, err := h.Open("a")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.ReadIO()
	if err != nil || s.Total().Bytes() != 30 {
		t.Fatalf("ReadIO = %+v, %v", s, err)
	}
	p, err := c.ReadPressure()
	if err != nil || p.Some.Total != 5 || p.Full.Total != 3 {
		t.Fatalf("ReadPressure = %+v, %v", p, err)
	}
	c2, err := h.Open("nopsi")
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.ReadPressure(); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("no io.pressure: %v", err)
	}
	if _, err := h.Open("noio"); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("no io.stat: %v", err)
	}
	if _, err := h.Open("missing"); !errors.Is(err, ErrCgroupGone) {
		t.Fatalf("missing cgroup: %v", err)
	}
}

func TestReadHostPressureMissing(t *testing.T) {
	t.Parallel()
	if _, err := ReadHostPressure(filepath.Join(t.TempDir(), "io")); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("err = %v", err)
	}
}

func TestKnobsOnFakeTree(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fakeCgroup(t, root, "c", map[string]string{
		"blkio.bfq.weight_device":          "default 100\n7:0 300\n",
		"blkio.throttle.read_bps_device":   "7:0 1048576\n",
		"blkio.throttle.write_bps_device":  "",
		"blkio.throttle.read_iops_device":  "",
		"blkio.throttle.write_iops_device": "8:0 5\n",
	})
	h := Hierarchy{Version: 1, Mount: root}
	w, err := h.ReadWeights("c", "blkio.bfq.weight_device")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := w.Device(Dev{7, 0}); !ok || v != 300 || w.Default != 100 {
		t.Fatalf("weights %+v", w)
	}
	l, err := h.ReadLimits("c", Dev{7, 0})
	if err != nil || l != (Limits{RBps: 1048576}) {
		t.Fatalf("limits %+v %v", l, err)
	}
	if err := h.SetDeviceWeight("c", "blkio.bfq.weight_device", Dev{7, 0}, 1000); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(root, "c", "blkio.bfq.weight_device"))
	if string(got) != "7:0 1000" {
		t.Fatalf("wrote %q", got)
	}
	if err := h.SetDeviceWeight("gone", "blkio.bfq.weight_device", Dev{7, 0}, 100); !errors.Is(err, ErrCgroupGone) {
		t.Fatalf("write to a removed cgroup: %v", err)
	}
	if _, err := h.ReadWeights("c", "blkio.weight_device"); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("absent CFQ file: %v", err)
	}
}

// Reading io.pressure fails with EOPNOTSUPP when PSI was disabled at boot
// while the files exist; no file in a temporary tree can do that, so the
// mapping that ReadPressure, Open and ReadHostPressure share is tested here.
func TestPressureErrMapping(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gone := filepath.Join(dir, "gone")
	pe := func(errno syscall.Errno) error {
		return fmt.Errorf("read x: %w", &os.PathError{Op: "read", Path: filepath.Join(dir, "io.pressure"), Err: errno})
	}
	for _, tc := range []struct {
		name         string
		dir          string
		err          error
		notAvailable bool
	}{
		{"ENOTSUP", dir, pe(syscall.ENOTSUP), true},
		{"EOPNOTSUPP", dir, pe(syscall.EOPNOTSUPP), true},
		{"ENOTSUP on a host file", "", pe(syscall.ENOTSUP), true},
		{"EIO", dir, pe(syscall.EIO), false},
		{"EACCES", dir, pe(syscall.EACCES), false},
		{"file hidden, cgroup stays", dir, fmt.Errorf("read x: %w", ErrCgroupGone), true},
		{"cgroup gone", gone, fmt.Errorf("read x: %w", ErrCgroupGone), false},
	} {
		got := pressureErr(tc.dir, tc.err)
		if errors.Is(got, ErrNotAvailable) != tc.notAvailable {
			t.Errorf("%s: pressureErr = %v, ErrNotAvailable %v, want %v", tc.name, got, errors.Is(got, ErrNotAvailable), tc.notAvailable)
		}
		if !tc.notAvailable && got != tc.err {
			t.Errorf("%s: error changed to %v", tc.name, got)
		}
		// The cause stays visible.
		if errors.Is(tc.err, syscall.ENOTSUP) && !errors.Is(got, syscall.ENOTSUP) {
			t.Errorf("%s: errno lost: %v", tc.name, got)
		}
	}
}

// TestBytesOnly checks that a cgroup opened for its bytes alone keeps one
// descriptor, reads the same bytes and no serviced counts — even when the
// serviced file is removed — and cannot be talked into the detail again.
func TestBytesOnly(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	fakeCgroup(t, root, "docker/abc", map[string]string{
		"blkio.throttle.io_service_bytes_recursive": blkioBytes,
		"blkio.throttle.io_serviced_recursive":      blkioIOs,
	})
	h := Hierarchy{Version: 1, Mount: root}
	c, err := h.Open("/docker/abc")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n := c.KeptFiles(); n != 2 {
		t.Fatalf("KeptFiles = %d before BytesOnly, want 2", n)
	}
	if err := c.BytesOnly(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(root, "docker/abc/blkio.throttle.io_serviced_recursive")); err != nil {
		t.Fatal(err)
	}
	if err := c.KeepDetail(); err != nil {
		t.Fatal(err)
	}
	if n := c.KeptFiles(); n != 1 {
		t.Fatalf("KeptFiles = %d after BytesOnly, want 1", n)
	}
	for i := range 3 {
		s, err := c.ReadIO()
		if err != nil {
			t.Fatal(err)
		}
		d, ok := s.Device(Dev{7, 0})
		if !ok || d.RBytes != 4096 || d.WBytes != 8192 || d.RIOs != 0 || d.WIOs != 0 {
			t.Fatalf("read %d: 7:0 = %+v, want the bytes and no serviced counts", i, d)
		}
	}
}

// TestReadBytesV1: ReadBytes reads the byte counters alone and keeps the
// serviced counts of the last ReadIO, saying they are stale once the bytes
// moved past them; a device new since has none yet; ReadIO reads them
// again, also when the bytes stand still but were read without them.
func TestReadBytesV1(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, "c", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fakeCgroup(t, root, "c", map[string]string{
		"blkio.throttle.io_service_bytes_recursive": "7:0 Read 4096\n7:0 Write 0\nTotal 4096\n",
		"blkio.throttle.io_serviced_recursive":      "7:0 Read 1\n7:0 Write 0\nTotal 1\n",
	})
	c, err := Hierarchy{Version: 1, Mount: root}.Open("c")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	check := func(what string, st IOStat, err error, stale bool, want ...DeviceIO) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if st.StaleIOs != stale || fmt.Sprint(st.Devices) != fmt.Sprint(want) {
			t.Fatalf("%s: %+v stale %v, want %+v stale %v", what, st.Devices, st.StaleIOs, want, stale)
		}
	}
	st, err := c.ReadBytes()
	check("first ReadBytes", st, err, true, DeviceIO{Dev: Dev{7, 0}, RBytes: 4096})
	st, err = c.ReadIO()
	check("ReadIO", st, err, false, DeviceIO{Dev: Dev{7, 0}, RBytes: 4096, RIOs: 1})
	st, err = c.ReadBytes()
	check("ReadBytes, nothing moved", st, err, false, DeviceIO{Dev: Dev{7, 0}, RBytes: 4096, RIOs: 1})
	write("blkio.throttle.io_service_bytes_recursive", "7:0 Read 8192\n7:0 Write 0\n8:0 Read 0\n8:0 Write 512\nTotal 8704\n")
	write("blkio.throttle.io_serviced_recursive", "7:0 Read 2\n7:0 Write 0\n8:0 Read 0\n8:0 Write 1\nTotal 3\n")
	want := []DeviceIO{{Dev: Dev{7, 0}, RBytes: 8192, RIOs: 1}, {Dev: Dev{8, 0}, WBytes: 512}}
	st, err = c.ReadBytes()
	check("ReadBytes, bytes moved", st, err, true, want...)
	st, err = c.ReadBytes()
	check("ReadBytes again, still stale", st, err, true, want...)
	st, err = c.ReadIO()
	check("ReadIO, bytes as before", st, err, false, DeviceIO{Dev: Dev{7, 0}, RBytes: 8192, RIOs: 2}, DeviceIO{Dev: Dev{8, 0}, WBytes: 512, WIOs: 1})
}

// TestReadKnobKeepsBufferWhole: a knob read hands its (pooled) buffer back
// whole, also after an empty file: the counter reads that take the buffer
// next read into its length, and a zero-length buffer made their grow loop
// spin (found by the throttle's tests hanging).
func TestReadKnobKeepsBufferWhole(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, body := range []string{"", "8:0 100\n", string(make([]byte, 3*initialBuf))} {
		p := filepath.Join(dir, "knob")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, initialBuf)
		data, err := readKnobInto(p, &buf)
		if err != nil || string(data) != body {
			t.Fatalf("read %d bytes: got %d, %v", len(body), len(data), err)
		}
		if len(buf) != cap(buf) || len(buf) < initialBuf || len(buf) < len(body) {
			t.Fatalf("after a %d-byte file the buffer is %d long of %d, want whole", len(body), len(buf), cap(buf))
		}
	}
}

// TestHostPressureFile: the kept PSI file parses, reads the file anew at
// every Read, and a missing one is ErrNotAvailable (PSI off).
func TestHostPressureFile(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "io")
	psi := func(total int) string {
		return fmt.Sprintf("some avg10=1.00 avg60=0.50 avg300=0.10 total=%d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=%d\n", total, total/2)
	}
	if err := os.WriteFile(p, []byte(psi(1000)), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := OpenHostPressure(p)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got, err := h.Read(); err != nil || got.Some.Total != 1000 || got.Full.Total != 500 {
		t.Fatalf("first read %+v, %v", got, err)
	}
	if err := os.WriteFile(p, []byte(psi(3000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Read(); err != nil || got.Some.Total != 3000 {
		t.Fatalf("read after the file changed %+v, %v: want some total 3000 µs", got, err)
	}
	if _, err := OpenHostPressure(filepath.Join(t.TempDir(), "io")); !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("missing: %v, want ErrNotAvailable", err)
	}
}
