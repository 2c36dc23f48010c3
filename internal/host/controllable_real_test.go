package host

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// realEngine asks this machine's Docker engine, or skips.
func realEngine(t *testing.T) (Facts, []Check) {
	t.Helper()
	testkit.NeedRoot(t)
	ep, err := ParseDockerHost(DefaultDockerHost)
	if err != nil {
		t.Fatal(err)
	}
	f := Gather(context.Background(), DefaultRoots(), &ep)
	testkit.Need(t, f.Engine != nil && f.Engine.Reachable && f.Engine.Error == "", "the Docker engine at %s: %+v", DefaultDockerHost, f.Engine)
	return f, Evaluate(f)
}

// The real engine's storage driver is reported with the verdict its
// driver deserves (this machine's engine uses fuse-overlayfs).
func TestRealStorageDriver(t *testing.T) {
	f, cs := realEngine(t)
	c := mustFind(t, cs, "docker.storage_driver")
	driver := f.Engine.StorageDriver
	if driver == "" || !strings.HasPrefix(c.Value, driver) {
		t.Fatalf("driver %q, check %+v", driver, c)
	}
	outside := driver == "fuse-overlayfs" || driver == "vfs"
	if outside != (c.Status == StatusWarn) || outside != (c.Fix != "") {
		t.Errorf("driver %s: %+v", driver, c)
	}
	if driver == "fuse-overlayfs" && c.Value != "fuse-overlayfs: only volumes and devices are controlled" {
		t.Errorf("value %q", c.Value)
	}
	t.Logf("%s %s %s; fix: %s", c.ID, c.Status, c.Value, c.Fix)
}

// The data root resolves to the disk that stat(2) says holds it, and
// that disk is shaped by default when it is a target.
func TestRealDataRoot(t *testing.T) {
	f, cs := realEngine(t)
	dr := f.DataRoot
	if dr == nil || dr.Error != "" || len(dr.Devices) == 0 {
		t.Fatalf("data root %+v", dr)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(dr.Dir, &st); err != nil {
		t.Fatal(err)
	}
	want, err := ResolveDisk(DefaultRoots(), fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		t.Fatal(err)
	}
	if dr.Devices[0] != want {
		t.Errorf("data root %s on %v, stat says %s", dr.Dir, dr.Devices, want)
	}
	c := mustFind(t, cs, "docker.data_root")
	var d Device
	for _, dv := range f.Devices {
		if dv.Name == want {
			d = dv
		}
	}
	if Shaped(d, nil) != (c.Status == StatusOK) {
		t.Errorf("%s shaped %v, check %+v", want, Shaped(d, nil), c)
	}
	t.Logf("%s %s %s", c.ID, c.Status, c.Value)

	// With --devices that leave the disk out, the check says so and how.
	f.DeviceGlobs = []string{"nvme9n9"}
	c = mustFind(t, Evaluate(f), "docker.data_root")
	if c.Status != StatusWarn || !strings.Contains(c.Fix, "--devices nvme9n9,"+dr.Devices[len(dr.Devices)-1]) {
		t.Errorf("with --devices nvme9n9: %+v", c)
	}
}

// A data root on a filesystem on a loop device resolves through the loop
// device to the disk holding its backing file.
func TestRealDataRootOnLoop(t *testing.T) {
	testkit.NeedRoot(t)
	_, err := exec.LookPath("mkfs.ext4")
	testkit.Need(t, err == nil, "mkfs.ext4 (e2fsprogs) not in PATH")
	loop := testkit.LoopDevice(t, 16)
	mnt := mountExt4(t, loop)
	dir := filepath.Join(mnt, "docker")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	devs, err := BlockDevices(DefaultRoots(), IOHierarchy{}, mech.Params{})
	if err != nil {
		t.Fatal(err)
	}
	lower, err := diskOfFile(DefaultRoots(), loop.File)
	if err != nil {
		t.Fatal(err)
	}
	dr := ResolveDataRoot(DefaultRoots(), "/proc/self/mountinfo", dir, devs)
	if dr.Mountpoint != mnt || dr.FSType != "ext4" || dr.Dev != loop.Dev() ||
		strings.Join(dr.Devices, " ") != loop.Name+" "+lower {
		t.Fatalf("data root %+v; want on %s (%s) over %s", dr, loop.Name, loop.Dev(), lower)
	}
	t.Logf("%s: %s at %s, devices %v", dir, dr.FSType, dr.Mountpoint, dr.Devices)
}

// mountExt4 makes an ext4 filesystem on loop and mounts it until the test
// ends.
func mountExt4(t *testing.T, loop testkit.Loop) string {
	t.Helper()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", loop.Path).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 %s: %v: %s", loop.Path, err, out)
	}
	mnt := t.TempDir()
	if err := unix.Mount(loop.Path, mnt, "ext4", 0, ""); err != nil {
		t.Fatalf("mount %s on %s: %v", loop.Path, mnt, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	return mnt
}

// The seed's claim, on this kernel: in a cgroup v1 cpu cgroup whose
// cpu.rt_runtime_us is 0 a task cannot take SCHED_FIFO; with a runtime it
// can. The check reads the same file and says info, then ok.
func TestRealRTRuntime(t *testing.T) {
	testkit.NeedRoot(t)
	layout, err := Layout(DefaultRoots())
	testkit.Need(t, err == nil, "a cgroup layout: %v", err)
	cpu, ok := layout.V1Controller("cpu")
	testkit.Need(t, ok, "a cgroup v1 cpu hierarchy (cpu.rt_runtime_us is v1 only)")
	_, err = os.Stat(filepath.Join(cpu.Mountpoint, "cpu.rt_runtime_us"))
	testkit.Need(t, err == nil, "RT group scheduling (CONFIG_RT_GROUP_SCHED): %v", err)
	_, err = exec.LookPath("chrt")
	testkit.Need(t, err == nil, "chrt (util-linux) not in PATH")

	parent := fmt.Sprintf("/ddiskqos-test-rt-%d", rand.IntN(1<<30))
	dir := testkit.Cgroup(t, filepath.Join(cpu.Mountpoint, parent))
	fifo := func() error {
		cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec chrt -f 1 true`, "sh", dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	check := func() Check {
		rt := ReadRTRuntime(cpu.Mountpoint, parent)
		f := Facts{Engine: &Engine{Reachable: true}, RT: &rt, IOErr: cgroupfs.ErrNoIOHierarchy}
		return mustFind(t, Evaluate(f), "docker.rt_runtime")
	}

	c := check()
	errAt0 := fifo()
	if c.Status != StatusInfo || !strings.Contains(c.Value, "= 0:") || errAt0 == nil || !strings.Contains(errAt0.Error(), "not permitted") {
		t.Fatalf("at 0: check %+v, chrt -f 1: %v", c, errAt0)
	}
	if err := os.WriteFile(filepath.Join(dir, "cpu.rt_runtime_us"), []byte("10000"), 0); err != nil {
		t.Fatal(err)
	}
	c2 := check()
	errAfter := fifo()
	if c2.Status != StatusOK || !strings.Contains(c2.Value, "= 10000 ") || errAfter != nil {
		t.Fatalf("at 10000: check %+v, chrt -f 1: %v", c2, errAfter)
	}
	t.Logf("rt_runtime 0: %s (%s); 10000: %s, chrt ok", c.Status, errAt0, c2.Status)
}

// The v1 claim of cgroup.writeback, measured: a task in a blkio cgroup
// that writes 32 MiB through the page cache is charged nothing when the
// flusher writes it back (sync from outside), and the full 32 MiB when it
// writes with O_DIRECT. (With fsync it is charged for what is still dirty
// when it calls fsync: all of it on a quiet machine, as little as 5 MiB
// out of 32 on this shared one while the flusher was busy, so fsync makes
// no stable test.)
func TestRealV1WritebackCharged(t *testing.T) {
	testkit.NeedRoot(t)
	layout, err := Layout(DefaultRoots())
	testkit.Need(t, err == nil, "a cgroup layout: %v", err)
	blkio, ok := layout.V1Controller("blkio")
	testkit.Need(t, ok, "a cgroup v1 blkio hierarchy (the claim is about v1)")
	_, err = exec.LookPath("mkfs.ext4")
	testkit.Need(t, err == nil, "mkfs.ext4 (e2fsprogs) not in PATH")
	loop := testkit.LoopDevice(t, 96)
	mnt := mountExt4(t, loop)
	h := cgroupfs.Hierarchy{Version: 1, Mount: blkio.Mountpoint}
	dev, err := cgroupfs.ParseDev(loop.Dev())
	if err != nil {
		t.Fatal(err)
	}
	if err := h.EnableV1Accounting(dev); err != nil {
		t.Fatal(err)
	}
	dir := testkit.Cgroup(t, filepath.Join(blkio.Mountpoint, fmt.Sprintf("ddiskqos-test-wb-%d", rand.IntN(1<<30))))

	written := func(name, conv string) uint64 {
		t.Helper()
		before := v1Written(t, dir, loop.Dev())
		script := `echo $$ > "$1/cgroup.procs" && exec dd if=/dev/zero of="$2" bs=1M count=32 status=none` + conv
		if out, err := exec.Command("sh", "-c", script, "sh", dir, filepath.Join(mnt, name)).CombinedOutput(); err != nil {
			t.Fatalf("dd: %v: %s", err, out)
		}
		// The flusher, not the writer, writes back whatever is dirty.
		if out, err := exec.Command("sync").CombinedOutput(); err != nil {
			t.Fatalf("sync: %v: %s", err, out)
		}
		return v1Written(t, dir, loop.Dev()) - before
	}
	buffered := written("buffered", "")
	direct := written("direct", " oflag=direct")
	const mib = 1 << 20
	if buffered > 4*mib || direct < 30*mib {
		t.Fatalf("charged to the writer: buffered %d B, O_DIRECT %d B; want < 4 MiB and >= 30 MiB", buffered, direct)
	}
	t.Logf("32 MiB written in a v1 blkio cgroup: buffered charged %.1f MiB, O_DIRECT %.1f MiB", float64(buffered)/mib, float64(direct)/mib)
}

// v1Written is the Write bytes of blkio.throttle.io_service_bytes of dir
// for dev.
func v1Written(t *testing.T, dir, dev string) uint64 {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "blkio.throttle.io_service_bytes"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == dev && fields[1] == "Write" {
			n, err := strconv.ParseUint(fields[2], 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}
