package mech

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// TestTable: every mechanism has a name and a knob of its own, is found
// by both, and opens a knob on each hierarchy version it has files on — a
// leveled one when its role says Apply writes it.
func TestTable(t *testing.T) {
	t.Parallel()
	names, knobs := map[Name]bool{}, map[string]bool{}
	for _, m := range All() {
		if m.Name == "" || m.Knob == "" || names[m.Name] || knobs[m.Knob] || m.Name == None {
			t.Fatalf("%+v: name and knob must be set and unique", m)
		}
		names[m.Name], knobs[m.Knob] = true, true
		if l, err := Lookup(m.Name); err != nil || l != m {
			t.Errorf("Lookup(%s) = %v, %v", m.Name, l, err)
		}
		if k, err := ByKnob(m.Knob); err != nil || k != m {
			t.Errorf("ByKnob(%s) = %v, %v", m.Knob, k, err)
		}
		if m.Role == Target && (m.Probe == nil || m.Beside == nil) {
			t.Errorf("%s runs beside a device's mechanism: it needs Probe and Beside", m.Name)
		}
		if m.Open == nil {
			if m.InCgroup() || m.Files != nil {
				t.Errorf("%s: no Open but cgroup files", m.Name)
			}
			continue
		}
		for v := 1; v <= 2; v++ {
			h := cgroupfs.Hierarchy{Version: v, Mount: t.TempDir()}
			k, err := m.Open(h, cgroupfs.Dev{Major: 7}, Params{LevelLimits: []uint64{0, 0, 0, 1 << 20}})
			if (err == nil) != (len(m.Files(v)) > 0) {
				t.Errorf("%s on v%d: Open error %v with files %q", m.Name, v, err, m.Files(v))
			}
			if _, leveled := k.(Leveled); err == nil && leveled != (m.Role != Caps) {
				t.Errorf("%s on v%d: leveled %v, role %d", m.Name, v, leveled, m.Role)
			}
		}
	}
	if _, err := Lookup("nope"); err == nil {
		t.Error("Lookup of an unknown name: no error")
	}
	if _, err := ByKnob("nope"); err == nil {
		t.Error("ByKnob of an unknown knob: no error")
	}
}

func TestRoles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		joined      string
		weight, cap bool
	}{
		{Join([]Name{BFQWeight, Throttle}), true, true},
		{"throttle", false, true},
		{Join([]Name{BFQWeight, LevelLimit}), true, false},
		{string(DockerWeight), true, false},
		{string(IOCostWeight), true, false},
		{"", false, false},
		{"none", false, false},
	} {
		if HasWeight(c.joined) != c.weight || HasCaps(c.joined) != c.cap {
			t.Errorf("%q: weight %v caps %v, want %v %v", c.joined, HasWeight(c.joined), HasCaps(c.joined), c.weight, c.cap)
		}
	}
	if !IsWeight(CFQWeight) || IsWeight(Throttle) || !IsCaps(Throttle) || IsCaps(LevelLimit) {
		t.Error("IsWeight/IsCaps disagree with the table")
	}
}

// fakeKnob is a cgroup directory in t.TempDir() with file holding body.
func fakeKnob(t *testing.T, v int, file, body string) (cgroupfs.Hierarchy, string) {
	t.Helper()
	h := cgroupfs.Hierarchy{Version: v, Mount: t.TempDir()}
	dir := filepath.Join(h.Mount, "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return h, filepath.Join(dir, file)
}

// TestWeightKnob: the value is the device's entry as text, "" without
// one; writing "" removes it the file's way; the scale is the
// mechanism's.
func TestWeightKnob(t *testing.T) {
	t.Parallel()
	dev := cgroupfs.Dev{Major: 7, Minor: 3}
	for _, c := range []struct {
		m           *Mech
		v           int
		file, reset string
		want1000    string
	}{
		{&bfq, 1, "blkio.bfq.weight_device", "7:3 default", "1000"},
		{&bfq, 2, "io.bfq.weight", "7:3 default", "1000"},
		{&cfq, 1, "blkio.weight_device", "7:3 0", "1000"},
		{&iocost, 2, "io.weight", "7:3 default", "100"},
	} {
		h, path := fakeKnob(t, c.v, c.file, "default 100\n7:3 300\n8:0 50\n")
		k, err := c.m.Open(h, dev, Params{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := k.Read("/c"); err != nil || got != "300" {
			t.Errorf("%s v%d: Read = %q, %v; want 300", c.m.Name, c.v, got, err)
		}
		if got := k.(Leveled).Want(1, 1000); got != c.want1000 {
			t.Errorf("%s: Want(1000) = %q, want %s", c.m.Name, got, c.want1000)
		}
		if err := k.Write("/c", ""); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(path); string(b) != c.reset {
			t.Errorf("%s v%d: reset wrote %q, want %q", c.m.Name, c.v, b, c.reset)
		}
		os.WriteFile(path, []byte("default 100\n"), 0o644)
		if got, err := k.Read("/c"); err != nil || got != "" {
			t.Errorf("%s: no entry reads %q, %v; want \"\"", c.m.Name, got, err)
		}
		if err := k.Write("/c", "12x"); err == nil || !strings.Contains(err.Error(), "12x") {
			t.Errorf("%s: bad value written: %v", c.m.Name, err)
		}
	}
	if got := iocostScale(10); got != 1 {
		t.Errorf("iocost scale of 10 = %d, want 1", got)
	}
}

// TestWeightValue: each weight's scale (iocost's divides by 10, rounding,
// never below 1; bfq and cfq take 10..1000 as it is), and no value for a
// mechanism that is not a weight or writes no file.
func TestWeightValue(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n    Name
		w    cgroupfs.Weight
		want string
	}{
		{IOCostWeight, 10, "1"}, {IOCostWeight, 1000, "100"}, {IOCostWeight, 100, "10"}, {IOCostWeight, 500, "50"},
		{IOCostWeight, 250, "25"}, {IOCostWeight, 14, "1"}, {IOCostWeight, 15, "2"},
		{BFQWeight, 10, "10"}, {BFQWeight, 1000, "1000"}, {CFQWeight, 250, "250"},
	} {
		if got, err := WeightValue(tt.n, tt.w); err != nil || got != tt.want {
			t.Errorf("WeightValue(%s, %d) = %q, %v; want %s", tt.n, tt.w, got, err, tt.want)
		}
	}
	for _, n := range []Name{Throttle, DockerWeight, "nope"} {
		if v, err := WeightValue(n, 100); err == nil {
			t.Errorf("WeightValue(%s) = %q, want an error", n, v)
		}
	}
}

// TestReadWrite: a knob read and written by the mechanism's name, as tools
// and tests do without an actuator; a mechanism with no cgroup file, or
// none on this hierarchy version, is an error naming it.
func TestReadWrite(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "c"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "c", "blkio.bfq.weight_device")
	if err := os.WriteFile(path, []byte("default 100\n7:0 300\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := cgroupfs.Hierarchy{Version: 1, Mount: root}
	dev := cgroupfs.Dev{Major: 7, Minor: 0}
	if v, err := Read(h, BFQWeight, dev, "/c"); err != nil || v != "300" {
		t.Fatalf("Read = %q, %v; want 300", v, err)
	}
	if err := Write(h, BFQWeight, dev, "/c", "700"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "7:0 700" {
		t.Fatalf("Write wrote %q", b)
	}
	if _, err := Read(h, IOCostWeight, dev, "/c"); err == nil || !strings.Contains(err.Error(), string(IOCostWeight)) {
		t.Errorf("iocost on v1: %v, want an error naming it", err)
	}
	if err := Write(h, DockerWeight, dev, "/c", "1"); err == nil || !strings.Contains(err.Error(), string(DockerWeight)) {
		t.Errorf("docker-weight: %v, want an error naming it", err)
	}
}

func TestLimitsValue(t *testing.T) {
	t.Parallel()
	for _, l := range []cgroupfs.Limits{{}, {RBps: 1 << 20}, {RBps: 1, WBps: 2, RIOps: 3, WIOps: 4}, {WIOps: 120}} {
		v := LimitsValue(l)
		got, err := ParseLimits(v)
		if err != nil || got != l {
			t.Errorf("%+v -> %q -> %+v, %v", l, v, got, err)
		}
	}
	if v := LimitsValue(cgroupfs.Limits{RBps: 5}); v != "rbps=5 wbps=max riops=max wiops=max" {
		t.Errorf("LimitsValue = %q", v)
	}
	for _, bad := range []string{"rbps", "rbps=x", "foo=1", "rbps=-1"} {
		if _, err := ParseLimits(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseLimits(%q): %v, want an error naming it", bad, err)
		}
	}
}

// TestLevelLimitKnob: each level wants its cap on reads and writes in
// the throttle's words, "" where it has none; the value goes to the v2
// io.max line as it is.
func TestLevelLimitKnob(t *testing.T) {
	t.Parallel()
	dev := cgroupfs.Dev{Major: 8, Minor: 16}
	h, path := fakeKnob(t, 2, "io.max", "8:0 rbps=100 wbps=max riops=max wiops=max\n8:16 rbps=max wbps=5000 riops=max wiops=max\n")
	k, err := levelLimit.Open(h, dev, Params{LevelLimits: []uint64{0, 0, 4 << 20, 1 << 20}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := k.Read("/c"); err != nil || got != "rbps=max wbps=5000 riops=max wiops=max" {
		t.Errorf("Read = %q, %v", got, err)
	}
	lk := k.(Leveled)
	for level, want := range map[int]string{1: "", 2: "", 3: "rbps=4194304 wbps=4194304 riops=max wiops=max",
		4: "rbps=1048576 wbps=1048576 riops=max wiops=max", 5: "", 0: ""} {
		if got := lk.Want(level, 100); got != want {
			t.Errorf("Want(level %d) = %q, want %q", level, got, want)
		}
	}
	if err := k.Write("/c", lk.Want(4, 100)); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(path); string(b) != "8:16 rbps=1048576 wbps=1048576 riops=max wiops=max" {
		t.Errorf("wrote %q", b)
	}
	if err := k.Write("/c", "rbps=fast"); err == nil || !strings.Contains(err.Error(), "rbps=fast") {
		t.Errorf("bad value written: %v", err)
	}
	if levelLimit.Beside(BFQWeight, Params{LevelLimits: []uint64{0, 0, 0, 0}}) || !levelLimit.Beside(BFQWeight, Params{LevelLimits: []uint64{0, 0, 0, 1}}) {
		t.Error("Beside: off without a cap, on with one")
	}
}

// TestLevelLimitProbe: each reason it cannot run on a device is named.
func TestLevelLimitProbe(t *testing.T) {
	t.Parallel()
	v1 := cgroupfs.Hierarchy{Version: 1, Mount: "/sys/fs/cgroup/blkio"}
	v2 := cgroupfs.Hierarchy{Version: 2, Mount: "/sys/fs/cgroup"}
	offered := map[Name]Offer{Throttle: {File: "io.max", Present: true, Known: true}}
	unknown := map[Name]Offer{Throttle: {File: "io.max"}}
	for _, c := range []struct {
		e    Env
		want string
	}{
		{Env{H: v2, Name: "vda", Offered: offered, Mechs: []Name{BFQWeight}}, ""},
		{Env{H: v1, Name: "sda", Offered: offered, Mechs: []Name{BFQWeight}}, ""},
		{Env{H: v2, Name: "vda", Offered: offered, Mechs: []Name{BFQWeight, Throttle}}, "the throttle runs on vda"},
		{Env{H: v2, Name: "vda", Offered: unknown}, "no /sys/fs/cgroup/*/io.max: kernel built without CONFIG_BLK_DEV_THROTTLING"},
		{Env{H: v1, Name: "sda"}, "blkio.throttle.read_bps_device"},
	} {
		v := probeLevelLimit(c.e)
		if (c.want == "") != v.OK || (!v.OK && !strings.Contains(v.Reason, c.want)) {
			t.Errorf("%+v: %+v, want %q", c.e, v, c.want)
		}
	}
}
