package calibrate

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

func TestDerive(t *testing.T) {
	t.Parallel()
	lat := func(p90, p99 float64) workload.Latency { return workload.Latency{P50: p90 / 2, P90: p90, P99: p99} }
	ms := []Measurement{
		{Pattern: SeqRead, BytesPerSec: 100 << 20, IOPS: 25},
		{Pattern: SeqRead4k, BytesPerSec: 4096 * 20000, IOPS: 20000},
		{Pattern: RandRead4k, BytesPerSec: 4096 * 5000, IOPS: 5000, Latency: lat(9000, 12000)},
		{Pattern: RandRead4kQD1, BytesPerSec: 4096 * 1000, IOPS: 1000, Latency: lat(800, 5000)},
		{Pattern: SeqWrite, BytesPerSec: 50 << 20, IOPS: 12},
		{Pattern: SeqWrite4k, BytesPerSec: 4096 * 10000, IOPS: 10000},
		{Pattern: RandWrite4k, BytesPerSec: 4096 * 3000, IOPS: 3000, Latency: lat(20000, 3000)},
		{Pattern: RandWrite4kQD1, BytesPerSec: 4096 * 500, IOPS: 500, Latency: lat(1500, 9000)},
	}
	dev := cgroupfs.Dev{Major: 8, Minor: 16}
	m, q, err := Derive(dev, ms)
	if err != nil {
		t.Fatal(err)
	}
	want := "8:16 ctrl=user model=linear rbps=104857600 rseqiops=20000 rrandiops=5000 wbps=52428800 wseqiops=10000 wrandiops=3000"
	if m.Line() != want {
		t.Errorf("model %q, want %q", m.Line(), want)
	}
	// Read: 3 x 800 us unloaded p90 = 2400 (under the saturated p99 of
	// 12000). Write: 3 x 1500 = 4500, capped at the saturated p99 3000.
	wantQ := "8:16 enable=1 ctrl=user rpct=95.00 rlat=2400 wpct=95.00 wlat=3000 min=50.00 max=100.00"
	if q.Line() != wantQ {
		t.Errorf("qos %q, want %q", q.Line(), wantQ)
	}

	// Reads only: the write coefficients copy the read ones.
	m, _, err = Derive(dev, ms[:4])
	if err != nil || m.WBps != m.RBps || m.WRandIOPS != m.RRandIOPS {
		t.Errorf("reads only: %q, %v", m.Line(), err)
	}
	// A pattern that moved nothing, or is missing, is named.
	bad := append([]Measurement(nil), ms...)
	bad[2].BytesPerSec, bad[2].IOPS = 0, 0
	if _, _, err := Derive(dev, bad); err == nil || !strings.Contains(err.Error(), string(RandRead4k)) {
		t.Errorf("zero randread: err %v, want it named", err)
	}
	if _, _, err := Derive(dev, ms[1:]); err == nil || !strings.Contains(err.Error(), string(SeqRead)) {
		t.Errorf("missing seqread: err %v, want it named", err)
	}
}

func TestPlan(t *testing.T) {
	t.Parallel()
	p := DefaultPlan()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	specs := p.Specs("/dev/x")
	if len(specs) != 8 {
		t.Fatalf("%d patterns, want 8", len(specs))
	}
	for _, s := range specs {
		if err := s.Spec.Validate(); err != nil {
			t.Errorf("%s: %v", s.Pattern, err)
		}
		if !s.Spec.Direct || s.Spec.Duration != p.Duration {
			t.Errorf("%s: %+v: want O_DIRECT for %v", s.Pattern, s.Spec, p.Duration)
		}
	}
	for _, b := range []Plan{
		{Duration: time.Millisecond, SeqBlock: 4096, SeqDepth: 1, IOPSDepth: 1},
		{Duration: time.Second, SeqBlock: 1000, SeqDepth: 1, IOPSDepth: 1},
		{Duration: time.Second, SeqBlock: 4096, SeqDepth: 0, IOPSDepth: 1},
		{Duration: time.Second, SeqBlock: 4096, SeqDepth: 1, IOPSDepth: 5000},
	} {
		if b.Validate() == nil {
			t.Errorf("plan %+v validated", b)
		}
	}
}

// sysTree is a sysfs with one disk sdb (8:16) and its partition sdb1
// (8:17), and an empty mount table.
func sysTree(t *testing.T) Roots {
	t.Helper()
	root := t.TempDir()
	r := Roots{Sys: filepath.Join(root, "sys"), Dev: filepath.Join(root, "dev"), Mountinfo: filepath.Join(root, "mountinfo")}
	write := func(rel, s string) {
		p := filepath.Join(r.Sys, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("devices/pci0/block/sdb/dev", "8:16\n")
	write("devices/pci0/block/sdb/sdb1/dev", "8:17\n")
	write("devices/pci0/block/sdb/sdb1/partition", "1\n")
	write("devices/pci0/block/sdb/holders/.keep", "")
	os.Remove(filepath.Join(r.Sys, "devices/pci0/block/sdb/holders/.keep"))
	for _, l := range []struct{ link, target string }{
		{"block/sdb", "../devices/pci0/block/sdb"},
		{"class/block/sdb", "../../devices/pci0/block/sdb"},
		{"class/block/sdb1", "../../devices/pci0/block/sdb/sdb1"},
	} {
		p := filepath.Join(r.Sys, l.link)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.Symlink(l.target, p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(r.Mountinfo, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestResolveAndInUse(t *testing.T) {
	t.Parallel()
	r := sysTree(t)
	d, err := Resolve(r, "sdb")
	if err != nil {
		t.Fatal(err)
	}
	if d.Dev != (cgroupfs.Dev{Major: 8, Minor: 16}) || d.Path != filepath.Join(r.Dev, "sdb") || len(d.Partitions) != 1 {
		t.Fatalf("Resolve sdb = %+v", d)
	}
	if _, err := Resolve(r, "sdb1"); !errors.Is(err, ErrPartition) || !strings.Contains(err.Error(), "sdb1") || !strings.Contains(err.Error(), "sdb") {
		t.Errorf("partition: err %v, want ErrPartition naming sdb1 and its disk", err)
	}
	for _, arg := range []string{"sdz", "", "..", "/dev/null-does-not-exist"} {
		if _, err := Resolve(r, arg); !errors.Is(err, ErrNoDevice) {
			t.Errorf("Resolve(%q): err %v, want ErrNoDevice", arg, err)
		}
	}

	// A mounted partition and a holder on the disk: both named.
	if err := os.WriteFile(r.Mountinfo, []byte("36 35 8:17 / /data rw,relatime - ext4 /dev/sdb1 rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.Sys, "devices/pci0/block/sdb/holders/dm-0"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	why, err := InUse(r, d)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(why, "\n")
	for _, want := range []string{"mounted at /data", "held by dm-0", "has partitions (sdb1)"} {
		if !strings.Contains(all, want) {
			t.Errorf("InUse = %q, want %q in it", why, want)
		}
	}
}
