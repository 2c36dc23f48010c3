package host

import (
	"context"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
)

// gatherWith gathers the facts of tr with a fake engine answering e.
func gatherWith(t *testing.T, tr *hosttest.Tree, e hosttest.Engine, globs ...string) Facts {
	t.Helper()
	ep, err := ParseDockerHost(hosttest.FakeEngine(t, tr.Root, e))
	if err != nil {
		t.Fatal(err)
	}
	f := Gather(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, &ep)
	f.DeviceGlobs = globs
	return f
}

func mustFind(t *testing.T, cs []Check, id string) Check {
	t.Helper()
	c, ok := find(cs, id)
	if !ok {
		t.Fatalf("no check %s in %d checks: %+v", id, len(cs), cs)
	}
	return c
}

func TestStorageDriverCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		driver  string
		overlay bool // the kernel lists overlay
		status  Status
		value   string
		fix     string
	}{
		{"overlay2", true, StatusOK, "overlay2", ""},
		{"btrfs", false, StatusOK, "btrfs", ""},
		{"fuse-overlayfs", true, StatusWarn, "fuse-overlayfs: only volumes and devices are controlled",
			`switch to overlay2 on a kernel with native overlay (this one lists overlay in /proc/filesystems): set "storage-driver": "overlay2" in /etc/docker/daemon.json`},
		{"fuse-overlayfs", false, StatusWarn, "fuse-overlayfs: only volumes and devices are controlled",
			"this one does not list overlay in /proc/filesystems: modprobe overlay first"},
		{"vfs", true, StatusWarn, "vfs: image copies at container creation are outside any container's cgroup", `"storage-driver": "overlay2"`},
	} {
		name := tc.driver
		if !tc.overlay {
			name += " without overlay"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := hosttest.Sample(t)
			fsys := "nodev\tsysfs\nnodev\ttmpfs\n\text4\n"
			if tc.overlay {
				fsys += "nodev\toverlay\n"
			}
			tr.Write("proc/filesystems", fsys)
			f := gatherWith(t, tr, hosttest.Engine{Version: "28.0.0", APIVersion: "1.48", CgroupDriver: "cgroupfs", CgroupVersion: "1", StorageDriver: tc.driver})
			c := mustFind(t, Evaluate(f), "docker.storage_driver")
			if c.Status != tc.status || c.Value != tc.value || !strings.Contains(c.Fix, tc.fix) || (tc.fix == "") != (c.Fix == "") {
				t.Errorf("got %s %q fix %q; want %s %q fix containing %q", c.Status, c.Value, c.Fix, tc.status, tc.value, tc.fix)
			}
		})
	}
	t.Run("engine without Driver", func(t *testing.T) {
		t.Parallel()
		f := gatherWith(t, hosttest.Sample(t), hosttest.Engine{Version: "1.13", APIVersion: "1.26"})
		if c, ok := find(Evaluate(f), "docker.storage_driver"); ok {
			t.Errorf("a check without a driver: %+v", c)
		}
	})
}

func TestWritebackCheck(t *testing.T) {
	t.Parallel()
	v1 := hosttest.New(t)
	v1.HybridV1(true)
	c := mustFind(t, Evaluate(Gather(context.Background(), Roots{Sys: v1.Sys, Proc: v1.Proc}, nil)), "cgroup.writeback")
	if c.Status != StatusWarn || !strings.Contains(c.Value, "charged to the flusher") || !strings.Contains(c.Fix, "systemd.unified_cgroup_hierarchy=1") {
		t.Errorf("v1: %+v", c)
	}
	// What v2 would do, as v2's own check says it (TestRealV2WritebackOwner):
	// the owner of the cached pages, not whoever dirtied them.
	if !strings.Contains(c.Fix, "cached pages") || strings.Contains(c.Fix, "dirtied") {
		t.Errorf("v1 fix says what v2 charges writeback to wrongly: %q", c.Fix)
	}
	v2 := hosttest.New(t)
	v2.UnifiedV2("-")
	c = mustFind(t, Evaluate(Gather(context.Background(), Roots{Sys: v2.Sys, Proc: v2.Proc}, nil)), "cgroup.writeback")
	if c.Status != StatusOK || c.Fix != "" || !strings.Contains(c.Value, "cgroup that cached the pages, not a rewriter") {
		t.Errorf("v2: %+v", c)
	}
	v2.Write("sys/fs/cgroup/cgroup.subtree_control", "cpu io pids\n")
	c = mustFind(t, Evaluate(Gather(context.Background(), Roots{Sys: v2.Sys, Proc: v2.Proc}, nil)), "cgroup.writeback")
	if c.Status != StatusWarn || !strings.Contains(c.Value, "without the memory controller") || !strings.Contains(c.Fix, "+memory") {
		t.Errorf("v2 without memory delegated: %+v", c)
	}
}

func TestDataRootCheck(t *testing.T) {
	t.Parallel()
	engine := hosttest.Engine{Version: "28.0.0", APIVersion: "1.48", CgroupDriver: "cgroupfs", CgroupVersion: "1",
		StorageDriver: "overlay2", RootDir: "/var/lib/docker"}
	for _, tc := range []struct {
		name    string
		mount   []string // mountpoint dev fstype source; none: the root (vda1)
		globs   []string
		status  Status
		devices []string
		value   string
		fix     string
	}{
		{"on the root partition", nil, nil, StatusOK, []string{"vda"},
			"/var/lib/docker on ext4 /dev/vda1 at /, device vda: shaped on vda (throttle)", ""},
		{"on dm over a partition", []string{"/var/lib/docker", "252:0", "xfs", "/dev/mapper/vg-docker"}, nil, StatusOK, []string{"dm-0", "vda"},
			"/var/lib/docker on xfs /dev/mapper/vg-docker at /var/lib/docker, device dm-0 over vda: shaped on dm-0 (throttle), vda (throttle)", ""},
		{"a parent mount holds it", []string{"/var/lib", "8:0", "ext4", "/dev/sda"}, nil, StatusOK, []string{"sda"},
			"/var/lib/docker on ext4 /dev/sda at /var/lib, device sda: shaped on sda (bfq-weight)", ""},
		{"not among --devices", []string{"/var/lib/docker", "252:0", "xfs", "/dev/mapper/vg-docker"}, []string{"sd*"}, StatusWarn, []string{"dm-0", "vda"},
			"/var/lib/docker on xfs /dev/mapper/vg-docker at /var/lib/docker, device dm-0 over vda: not among the devices ddiskqos shapes",
			"add vda to the daemon's devices: --devices sd*,vda (or devices: in its config file)"},
		{"the lower disk among --devices", []string{"/var/lib/docker", "252:0", "xfs", "/dev/mapper/vg-docker"}, []string{"vd*"}, StatusOK, []string{"dm-0", "vda"},
			"/var/lib/docker on xfs /dev/mapper/vg-docker at /var/lib/docker, device dm-0 over vda: shaped on vda (throttle)", ""},
		{"memory-backed", []string{"/var/lib/docker", "253:0", "ext4", "/dev/zram0"}, nil, StatusWarn, []string{"zram0"},
			"/var/lib/docker on ext4 /dev/zram0 at /var/lib/docker, device zram0: not among the devices ddiskqos shapes", `"data-root": "/path/on/disk"`},
		{"tmpfs", []string{"/var/lib/docker", "0:55", "tmpfs", "tmpfs"}, nil, StatusInfo, nil,
			"/var/lib/docker on tmpfs tmpfs at /var/lib/docker: no block device under it", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := hosttest.Sample(t)
			if tc.mount != nil {
				tr.Mount(tc.mount[0], tc.mount[1], tc.mount[2], tc.mount[3])
			}
			f := gatherWith(t, tr, engine, tc.globs...)
			if f.DataRoot == nil || strings.Join(f.DataRoot.Devices, " ") != strings.Join(tc.devices, " ") {
				t.Fatalf("data root %+v, want devices %q", f.DataRoot, tc.devices)
			}
			c := mustFind(t, Evaluate(f), "docker.data_root")
			if c.Status != tc.status || c.Value != tc.value || !strings.Contains(c.Fix, tc.fix) || (tc.fix == "") != (c.Fix == "") {
				t.Errorf("got %s %q fix %q\nwant %s %q fix containing %q", c.Status, c.Value, c.Fix, tc.status, tc.value, tc.fix)
			}
		})
	}
}

func TestRTRuntimeCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		driver       string
		root, parent string // "" leaves the file out
		status       Status
		value, fix   string
	}{
		{"parent at 0", "cgroupfs", "950000", "0", StatusInfo,
			"$CPU/docker/cpu.rt_runtime_us = 0: containers cannot use SCHED_FIFO (root 950000)",
			"echo 950000 > $CPU/docker/cpu.rt_runtime_us (until the cgroup is made again; to keep it: \"cpu-rt-runtime\": 950000 in /etc/docker/daemon.json), then docker run --cpu-rt-runtime=95000 --cap-add=SYS_NICE --ulimit rtprio=99"},
		{"systemd parent at 0, root smaller", "systemd", "500000", "0", StatusInfo,
			"$CPU/system.slice/cpu.rt_runtime_us = 0: containers cannot use SCHED_FIFO (root 500000)",
			"echo 500000 > $CPU/system.slice/cpu.rt_runtime_us"},
		{"parent set", "cgroupfs", "950000", "950000", StatusOK,
			"$CPU/docker/cpu.rt_runtime_us = 950000 (root 950000): containers started with --cpu-rt-runtime can use SCHED_FIFO", ""},
		{"parent not made yet", "cgroupfs", "950000", "", StatusInfo,
			"$CPU/docker/cpu.rt_runtime_us does not exist yet (made at the first container start, with 0); root 950000",
			"\"cpu-rt-runtime\": 950000 in /etc/docker/daemon.json"},
		{"no RT group scheduling", "cgroupfs", "", "", StatusOK,
			"no cpu.rt_runtime_us in $CPU: the kernel has no RT group scheduling, real-time tasks are not limited per cgroup", ""},
		{"garbage", "cgroupfs", "950000", "lots", StatusWarn,
			"error: $CPU/docker/cpu.rt_runtime_us: \"lots\" is not a number", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := hosttest.Sample(t)
			parent := "docker"
			if tc.driver == "systemd" {
				parent = "system.slice"
			}
			if tc.root != "" {
				tr.Write("sys/fs/cgroup/cpu/cpu.rt_runtime_us", tc.root+"\n")
			}
			if tc.parent != "" {
				tr.Write("sys/fs/cgroup/cpu/"+parent+"/cpu.rt_runtime_us", tc.parent+"\n")
			}
			f := gatherWith(t, tr, hosttest.Engine{Version: "28.0.0", APIVersion: "1.48", CgroupDriver: tc.driver, CgroupVersion: "1"})
			c := mustFind(t, Evaluate(f), "docker.rt_runtime")
			anon := func(s string) string { return strings.ReplaceAll(s, tr.Sys+"/fs/cgroup/cpu", "$CPU") }
			if c.Status != tc.status || anon(c.Value) != tc.value || !strings.Contains(anon(c.Fix), tc.fix) || (tc.fix == "") != (c.Fix == "") {
				t.Errorf("got %s %q fix %q\nwant %s %q fix containing %q", c.Status, anon(c.Value), anon(c.Fix), tc.status, tc.value, tc.fix)
			}
		})
	}
	t.Run("v2 has no finding", func(t *testing.T) {
		t.Parallel()
		tr := hosttest.New(t)
		tr.UnifiedV2("-")
		f := gatherWith(t, tr, hosttest.Engine{Version: "28.0.0", APIVersion: "1.48", CgroupDriver: "systemd", CgroupVersion: "2"})
		if c, ok := find(Evaluate(f), "docker.rt_runtime"); ok {
			t.Errorf("v2: %+v", c)
		}
	})
}

// TestMountOf: the mount that holds a directory, on mountinfo lines parsed
// by the one mountinfo parser (cgroupfs.ParseMounts).
func TestMountOf(t *testing.T) {
	t.Parallel()
	in := "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n" +
		"40 22 0:40 / /mnt/with\\040space rw master:1 shared:2 - tmpfs tmpfs rw\n" +
		"41 22 7:3 / /var/lib/docker rw - ext4 /dev/loop3 rw,errors=continue\n"
	ms, err := cgroupfs.ParseMounts(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dir, want string }{
		{"/var/lib/docker", "/var/lib/docker"}, {"/var/lib/docker/volumes/x", "/var/lib/docker"},
		{"/var/lib/dockerd", "/"}, {"/mnt/with space/a", "/mnt/with space"}, {"/", "/"},
	} {
		if m, ok := MountOf(ms, tc.dir); !ok || m.Mountpoint != tc.want {
			t.Errorf("MountOf(%s) = %q %v, want %q", tc.dir, m.Mountpoint, ok, tc.want)
		}
	}
	if _, ok := MountOf(nil, "/x"); ok {
		t.Error("MountOf on no mounts found one")
	}
}
