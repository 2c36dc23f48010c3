package host

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

func devicesOf(t *testing.T, tr *hosttest.Tree) map[string]Device {
	t.Helper()
	r := Roots{Sys: tr.Sys, Proc: tr.Proc}
	l, err := Layout(r)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := Devices(r, l, mech.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(ds, func(a, b Device) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("devices not sorted by name")
	}
	m := map[string]Device{}
	for _, d := range ds {
		m[d.Name] = d
	}
	return m
}

func TestMechanism(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		setup     func(tr *hosttest.Tree)
		dev       string
		mech      Mechanism
		weights   bool
		devFile   string
		inReason  []string
		fix       string
		inVerifed string
	}{
		{
			name: "v1 bfq inferred from root stats",
			setup: func(tr *hosttest.Tree) {
				tr.HybridV1(true)
				tr.AddDisk(hosttest.Disk{Name: "sda", Dev: "8:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "sda", mech: MechBFQWeight, weights: true, devFile: "blkio.bfq.weight_device",
			inReason: []string{"scheduler is bfq"}, inVerifed: "inferred: blkio.bfq.weight exists only in child cgroups",
		},
		{
			name: "v1 bfq seen in a child cgroup",
			setup: func(tr *hosttest.Tree) {
				tr.HybridV1(true)
				tr.Write("sys/fs/cgroup/blkio/docker/blkio.bfq.weight", "100\n")
				tr.AddDisk(hosttest.Disk{Name: "sda", Dev: "8:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "sda", mech: MechBFQWeight, weights: true, devFile: "blkio.bfq.weight_device",
			inVerifed: "seen in a child cgroup",
		},
		{
			name: "v1 bfq without group scheduling",
			setup: func(tr *hosttest.Tree) {
				tr.HybridV1(false)
				tr.Write("sys/fs/cgroup/blkio/docker/blkio.throttle.read_bps_device", "")
				tr.AddDisk(hosttest.Disk{Name: "sda", Dev: "8:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "sda", mech: MechThrottle, inReason: []string{"CONFIG_BFQ_GROUP_IOSCHED", "blkio.throttle.*"},
		},
		{
			name: "v1 none",
			setup: func(tr *hosttest.Tree) {
				tr.HybridV1(true)
				tr.AddDisk(hosttest.Disk{Name: "loop3", Dev: "7:3", Scheduler: hosttest.SchedNone, Sectors: 100, BackingFile: "/x"})
			},
			dev: "loop3", mech: MechThrottle,
			inReason: []string{"scheduler is none: weights are ignored", "iocost would need cgroup v2"},
			fix:      "echo bfq > /sys/block/loop3/queue/scheduler",
		},
		{
			name: "v1 mq-deadline, bfq not offered",
			setup: func(tr *hosttest.Tree) {
				tr.HybridV1(false)
				tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: "none [mq-deadline] kyber", Sectors: 100})
			},
			dev: "vda", mech: MechThrottle, fix: "modprobe bfq && echo bfq > /sys/block/vda/queue/scheduler",
		},
		{
			name: "cfq on an old kernel",
			setup: func(tr *hosttest.Tree) {
				tr.Mountinfo("/sys/fs/cgroup/blkio cgroup rw,blkio", "/sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct")
				for _, f := range []string{"blkio.leaf_weight", "blkio.leaf_weight_device", "blkio.time", "blkio.sectors", "blkio.throttle.read_bps_device"} {
					tr.Write("sys/fs/cgroup/blkio/"+f, "")
				}
				tr.AddDisk(hosttest.Disk{Name: "sda", Dev: "8:0", Scheduler: hosttest.SchedCFQ, Rotational: true, Sectors: 100})
			},
			dev: "sda", mech: MechCFQWeight, weights: true, devFile: "blkio.weight_device",
			inReason: []string{"scheduler is cfq"}, inVerifed: "blkio.leaf_weight",
		},
		{
			name: "v2 iocost enabled, preferred over bfq",
			setup: func(tr *hosttest.Tree) {
				tr.UnifiedV2("8:0 enable=1 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n")
				tr.AddDisk(hosttest.Disk{Name: "sda", Dev: "8:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "sda", mech: MechIOCostWeight, weights: true, devFile: "io.weight",
			inReason: []string{"iocost is enabled for 8:0", "preferred over bfq"},
		},
		{
			name: "v2 iocost built but off, scheduler none",
			setup: func(tr *hosttest.Tree) {
				tr.UnifiedV2("8:0 enable=0 ctrl=auto\n")
				tr.AddDisk(hosttest.Disk{Name: "nvme0n1", Dev: "259:0", Scheduler: hosttest.SchedNone, Sectors: 100})
			},
			dev: "nvme0n1", mech: MechThrottle, inReason: []string{"io.max", "or enable iocost: echo '259:0 enable=1' >"},
			fix: "echo bfq > /sys/block/nvme0n1/queue/scheduler",
		},
		{
			name: "v2 bfq, no child cgroup yet",
			setup: func(tr *hosttest.Tree) {
				tr.UnifiedV2("-")
				tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "vda", mech: MechBFQWeight, weights: true, devFile: "io.bfq.weight",
			inReason: []string{"not verified"},
		},
		{
			name: "v2 bfq seen in a child",
			setup: func(tr *hosttest.Tree) {
				tr.UnifiedV2("-")
				tr.Write("sys/fs/cgroup/system.slice/io.bfq.weight", "default 100\n")
				tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "vda", mech: MechBFQWeight, weights: true, devFile: "io.bfq.weight", inVerifed: "system.slice/io.bfq.weight",
		},
		{
			name: "v2 bfq, child proves io.bfq.weight absent",
			setup: func(tr *hosttest.Tree) {
				tr.UnifiedV2("-")
				tr.Write("sys/fs/cgroup/system.slice/io.max", "")
				tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "vda", mech: MechThrottle, inReason: []string{"io.bfq.weight is not offered"},
		},
		{
			name: "v2 without the io controller",
			setup: func(tr *hosttest.Tree) {
				tr.UnifiedV2("-")
				tr.Write("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n")
				tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "vda", mech: MechNone, inReason: []string{"no io controller"},
		},
		{
			name: "no I/O hierarchy",
			setup: func(tr *hosttest.Tree) {
				tr.Mountinfo("/sys/fs/cgroup/cpu cgroup rw,cpu")
				tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
			},
			dev: "vda", mech: MechNone, inReason: []string{"no I/O cgroup hierarchy"},
		},
		{
			name: "dm stacked over a partition",
			setup: func(tr *hosttest.Tree) {
				tr.HybridV1(true)
				tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100, Partitions: []hosttest.Partition{{Name: "vda1", Dev: "254:1"}}})
				tr.AddDisk(hosttest.Disk{Name: "dm-0", Dev: "252:0", Scheduler: "none", Sectors: 50, Slaves: []string{"vda1"}})
			},
			dev: "dm-0", mech: MechThrottle, inReason: []string{"stacked dm device", "disks under it (vda)"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := hosttest.New(t)
			tc.setup(tr)
			d, ok := devicesOf(t, tr)[tc.dev]
			if !ok {
				t.Fatalf("device %s not listed", tc.dev)
			}
			if d.Mechanism != tc.mech || d.WeightsEffective != tc.weights || d.WeightDeviceFile != tc.devFile {
				t.Errorf("got %s weights=%v file=%q, want %s weights=%v file=%q\nreason: %s", d.Mechanism, d.WeightsEffective, d.WeightDeviceFile, tc.mech, tc.weights, tc.devFile, d.Reason)
			}
			for _, s := range tc.inReason {
				if !strings.Contains(d.Reason, s) {
					t.Errorf("reason %q lacks %q", d.Reason, s)
				}
			}
			if tc.fix != "" && d.Fix != tc.fix {
				t.Errorf("fix = %q, want %q", d.Fix, tc.fix)
			}
			if !strings.Contains(d.Verified, tc.inVerifed) {
				t.Errorf("verified = %q, want it to contain %q", d.Verified, tc.inVerifed)
			}
			if d.WeightsEffective != (d.Weight != nil) {
				t.Errorf("weight range %v with weights_effective=%v", d.Weight, d.WeightsEffective)
			}
		})
	}
}

func TestDevicesSample(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	m := devicesOf(t, tr)
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"dm-0", "loop0", "loop1", "sda", "vda", "zram0"}; !slices.Equal(names, want) {
		t.Fatalf("devices %v, want %v", names, want)
	}
	for _, tc := range []struct {
		name     string
		target   bool
		backing  bool
		kind     string
		rotating bool
	}{
		{"vda", true, true, "virtio", true},
		{"sda", true, true, "scsi", true},
		{"loop0", true, true, "loop", false},
		{"loop1", false, false, "loop", false},
		{"zram0", false, true, "zram", false},
		{"dm-0", true, true, "dm", false},
	} {
		d := m[tc.name]
		if d.Target != tc.target || d.Backing != tc.backing || d.Kind != tc.kind || d.Rotational != tc.rotating {
			t.Errorf("%s: target=%v backing=%v kind=%s rot=%v, want %v %v %s %v", tc.name, d.Target, d.Backing, d.Kind, d.Rotational, tc.target, tc.backing, tc.kind, tc.rotating)
		}
	}
	if got := m["vda"].Partitions; !slices.Equal(got, []string{"vda1", "vda2"}) {
		t.Errorf("vda partitions %v", got)
	}
	if got := m["dm-0"].Slaves; !slices.Equal(got, []string{"vda"}) {
		t.Errorf("dm-0 slaves %v (partitions must resolve to their disk)", got)
	}
	if d := m["vda"]; d.Major != 254 || d.Minor != 0 || d.Dev != "254:0" || d.SizeBytes != 41943040*512 {
		t.Errorf("vda numbers: %+v", d)
	}
	if m["loop0"].BackingFile != "/var/tmp/disk.img" {
		t.Errorf("loop0 backing file %q", m["loop0"].BackingFile)
	}
	if m["zram0"].Scheduler != "" || len(m["zram0"].Schedulers) != 0 {
		t.Errorf("zram0 has no scheduler file, got %q", m["zram0"].Scheduler)
	}
}

func TestHiddenDeviceSkipped(t *testing.T) {
	t.Parallel()
	tr := hosttest.New(t)
	tr.HybridV1(true)
	tr.AddDisk(hosttest.Disk{Name: "nvme0c0n1", Dev: "259:1", Scheduler: hosttest.SchedNone, Sectors: 100, Hidden: true})
	tr.AddDisk(hosttest.Disk{Name: "nvme0n1", Dev: "259:0", Scheduler: hosttest.SchedNone, Sectors: 100})
	m := devicesOf(t, tr)
	if _, ok := m["nvme0c0n1"]; ok || len(m) != 1 {
		t.Errorf("hidden multipath device listed: %v", m)
	}
}

func TestResolveDisk(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	r := Roots{Sys: tr.Sys, Proc: tr.Proc}
	for in, want := range map[string]string{"vda1": "vda", "vda2": "vda", "vda": "vda", "254:1": "vda", "254:0": "vda", "loop0": "loop0", "7:0": "loop0", "dm-0": "dm-0"} {
		got, err := ResolveDisk(r, in)
		if err != nil || got != want {
			t.Errorf("ResolveDisk(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"sdz", "9:9", "", "..", "../block/vda", "vda/../../x"} {
		if _, err := ResolveDisk(r, bad); !errors.Is(err, ErrNoDevice) {
			t.Errorf("ResolveDisk(%q): err = %v, want ErrNoDevice", bad, err)
		}
	}
}

// TestDevName: a device's own name from its number, a partition's too (not
// its disk's, unlike ResolveDisk); a number sysfs does not know is
// ErrNoDevice.
func TestDevName(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	r := Roots{Sys: tr.Sys, Proc: tr.Proc}
	for _, c := range []struct {
		dev  cgroupfs.Dev
		want string
	}{{cgroupfs.Dev{Major: 254, Minor: 0}, "vda"}, {cgroupfs.Dev{Major: 254, Minor: 1}, "vda1"}, {cgroupfs.Dev{Major: 7, Minor: 0}, "loop0"}} {
		if got, err := DevName(r, c.dev); err != nil || got != c.want {
			t.Errorf("DevName(%s) = %q, %v; want %q", c.dev, got, err, c.want)
		}
	}
	if got, err := DevName(r, cgroupfs.Dev{Major: 9, Minor: 9}); !errors.Is(err, ErrNoDevice) || got != "" {
		t.Errorf("DevName(9:9) = %q, %v; want ErrNoDevice", got, err)
	}
}

func TestLayoutReroot(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	r := Roots{Sys: tr.Sys, Proc: tr.Proc}
	l, err := Layout(r)
	if err != nil {
		t.Fatal(err)
	}
	if l.Mode != cgroupfs.ModeHybrid || l.Unified != filepath.Join(tr.Sys, "fs/cgroup/unified") {
		t.Errorf("layout %+v", l)
	}
	h, err := l.IOHierarchy()
	if err != nil || h.Mount != filepath.Join(tr.Sys, "fs/cgroup/blkio") || h.Version != 1 {
		t.Errorf("io hierarchy %+v, %v", h, err)
	}
	// Default roots leave the mount table as it is.
	if got := DefaultRoots().reroot("/sys/fs/cgroup/blkio"); got != "/sys/fs/cgroup/blkio" {
		t.Errorf("default reroot changed the path: %s", got)
	}
	if got := r.reroot("/run/cg"); got != "/run/cg" {
		t.Errorf("mount outside /sys rerooted: %s", got)
	}
}

func TestNoBlockDir(t *testing.T) {
	t.Parallel()
	_, err := BlockDevices(Roots{Sys: t.TempDir(), Proc: t.TempDir()}, IOHierarchy{}, mech.Params{})
	if err == nil {
		t.Fatal("no error without sys/block")
	}
}
