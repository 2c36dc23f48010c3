package host

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// The claim behind docker.storage_driver, measured on this machine's
// engine: with fuse-overlayfs, 32 MiB a container writes (and fdatasyncs)
// into its own root filesystem are charged to no device in its blkio
// cgroup, while 32 MiB it writes to a device it was given (--device) are.
// The control shows the disk under the data root is counted at all: a
// process in a blkio cgroup of the test writing to a file in the data
// root's filesystem with O_DIRECT is charged for it.
func TestRealStorageDriverChargesRootfs(t *testing.T) {
	f, _ := realEngine(t)
	testkit.Need(t, f.Engine.StorageDriver == "fuse-overlayfs", "an engine on fuse-overlayfs (this one: %s)", f.Engine.StorageDriver)
	testkit.Need(t, f.Engine.CgroupVersion == "1" && f.Engine.CgroupDriver == "cgroupfs", "a cgroup v1 engine with the cgroupfs driver (containers in /docker/<id>)")
	testkit.Need(t, f.DataRoot != nil && len(f.DataRoot.Devices) > 0, "the data root's disk: %+v", f.DataRoot)
	blkio, ok := f.Layout.V1Controller("blkio")
	testkit.Need(t, ok, "a cgroup v1 blkio hierarchy")
	h := cgroupfs.Hierarchy{Version: 1, Mount: blkio.Mountpoint}
	disk := f.DataRoot.Devices[len(f.DataRoot.Devices)-1]
	var diskDev string
	for _, d := range f.Devices {
		if d.Name == disk {
			diskDev = d.Dev
		}
	}
	dev, err := cgroupfs.ParseDev(diskDev)
	if err != nil {
		t.Fatalf("%s: %v", disk, err)
	}
	// The no-op rule the daemon writes too: it limits nothing, and without
	// it v1 counts nothing on the disk.
	if err := h.EnableV1Accounting(dev); err != nil {
		t.Fatal(err)
	}

	// Control: O_DIRECT into a file in the data root's filesystem.
	ctl := testkit.Cgroup(t, filepath.Join(h.Mount, fmt.Sprintf("ddiskqos-test-ctl-%d", rand.IntN(1<<30))))
	dir, err := os.MkdirTemp(f.DataRoot.Dir, "ddiskqos-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	script := `echo $$ > "$1/cgroup.procs" && exec dd if=/dev/zero of="$2" bs=1M count=8 oflag=direct status=none`
	if out, err := exec.Command("sh", "-c", script, "sh", ctl, filepath.Join(dir, "f")).CombinedOutput(); err != nil {
		t.Fatalf("dd: %v: %s", err, out)
	}
	if w := v1Written(t, ctl, diskDev); w < 8<<20 {
		t.Fatalf("control: 8 MiB O_DIRECT into %s charged %d B on %s: the disk is not counted", dir, w, disk)
	}

	c := dockertest.Client(t)
	img := dockertest.BuildImage(t, dockertest.UniqueTag("storage"), dockertest.Remove())
	loop := testkit.LoopDevice(t, 40)
	// The main process only keeps the container (and its cgroup) alive.
	ctr := dockertest.RunContainer(t, c, dockertest.RunOptions{Image: img,
		Args:    []string{"workload", "--duration", "2m", "--rate", "4096", "--bs", "4k", "--loop", "read", dockertest.Entrypoint},
		Devices: []dockertest.Device{{Host: loop.Path, Container: "/dev/xdisk"}}})
	dockertest.WaitRunning(t, c, ctr.ID, 30*time.Second)
	cg := filepath.Join(h.Mount, "docker", ctr.ID)
	total := func() uint64 { // write bytes on every device
		t.Helper()
		b, err := os.ReadFile(filepath.Join(cg, "blkio.throttle.io_service_bytes"))
		if err != nil {
			t.Fatal(err)
		}
		var sum uint64
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) == 3 && f[1] == "Write" {
				var n uint64
				fmt.Sscan(f[2], &n)
				sum += n
			}
		}
		return sum
	}
	before := total()
	execIn(t, c, ctr.ID, "workload", "--create", "--sync", "--bytes", "32MiB", "write", "/big")
	rootfs := total() - before
	execIn(t, c, ctr.ID, "workload", "--direct", "--bytes", "32MiB", "write", "/dev/xdisk")
	device := total() - before - rootfs
	const mib = 1 << 20
	if rootfs > 2*mib || device < 32*mib {
		t.Fatalf("container on fuse-overlayfs: 32 MiB into its root filesystem charged %d B, 32 MiB to --device charged %d B; want < 2 MiB and >= 32 MiB", rootfs, device)
	}
	t.Logf("fuse-overlayfs: 32 MiB written+fdatasync'd into the rootfs charged %.1f MiB to the container; 32 MiB to --device %.1f MiB", float64(rootfs)/mib, float64(device)/mib)
}

// execIn runs the image's binary with args in the container and fails
// the test unless it exits 0.
func execIn(t *testing.T, c *client.Client, id string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ex, err := c.ExecCreate(ctx, id, client.ExecCreateOptions{Cmd: append([]string{dockertest.Entrypoint}, args...),
		AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatal(err)
	}
	att, err := c.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	io.Copy(&out, att.Reader)
	att.Close()
	in, err := c.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Running || in.ExitCode != 0 {
		t.Fatalf("exec %q: running %v, exit %d: %s", args, in.Running, in.ExitCode, out.String())
	}
}
