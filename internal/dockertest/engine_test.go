package dockertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestRealPrivateEngine starts a private dockerd, runs a container in it,
// restarts the engine (the container keeps running with the same pid: live
// restore), stops it, starts it and stops it again with a container still
// running, and then checks that the cleanup left nothing behind: no
// process, mount, cgroup or directory of the engine.
func TestRealPrivateEngine(t *testing.T) {
	testkit.NeedRoot(t)
	var root, parent, shim string
	var pids []int
	t.Run("engine", func(t *testing.T) {
		e := StartEngine(t)
		root, parent = e.Root(), e.CgroupParent()
		pids = append(pids, e.Pid(), e.ContainerdPid())
		if _, err := os.Stat(filepath.Join(root, "key.json")); err != nil {
			t.Errorf("trust key not kept under the engine's root: %v", err)
		}
		c := e.Client(t)
		img := e.Image(t)
		// Not RunContainer: its cleanup would need the engine, and this
		// container is left for the engine's cleanup with the engine down.
		ctx := context.Background()
		cr, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Config: &container.Config{Image: img,
			Cmd: []string{"workload", "--bytes", "1GiB", "--rate", "1M/s", "--loop", "read", Entrypoint}},
			HostConfig: &container.HostConfig{NetworkMode: "none"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		pid := WaitRunning(t, c, cr.ID, 30*time.Second)
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			t.Fatal(err)
		}
		if want := ":blkio:" + parent + "/" + cr.ID; !strings.Contains(string(cg), want) {
			t.Errorf("/proc/%d/cgroup of the container lacks %q:\n%s", pid, want, cg)
		}

		stopping, starting := e.Restart(t)
		t.Logf("restart: dockerd exited %s after SIGTERM, answered %s after the start",
			stopping.Round(time.Millisecond), starting.Round(time.Millisecond))
		pids = append(pids, e.Pid(), e.ContainerdPid())
		if got := WaitRunning(t, c, cr.ID, 10*time.Second); got != pid {
			t.Errorf("after the restart the container's pid is %d, was %d: not live-restored", got, pid)
		}

		// Stopped, the engine does not answer and the container runs on;
		// the cleanup must kill it by its cgroup and its shim.
		e.Stop(t)
		if _, err := c.Ping(ctx, client.PingOptions{}); err == nil {
			t.Error("the engine answers after Stop")
		}
		if waitGone(pid, 0) {
			t.Errorf("container process %d gone while the engine is stopped", pid)
		}
		pids = append(pids, pid)
		shim = shimSocket(filepath.Join(root, "x", "containerd", "containerd.sock"), "moby", cr.ID)
		if _, err := os.Stat(shim); err != nil {
			t.Errorf("shim socket of the running container: %v", err)
		}
	})
	// The subtest's cleanups have run.
	for _, pid := range pids {
		if !waitGone(pid, 5*time.Second) {
			args, _ := cmdline(pid)
			t.Errorf("process %d %q still running after cleanup", pid, args)
		}
	}
	if _, err := os.Stat(shim); !os.IsNotExist(err) {
		t.Errorf("shim socket %s left: %v", shim, err)
	}
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("engine root %s still there: %v", root, err)
	}
	ms, err := cgroupfs.ReadMounts("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Mountpoint == root || strings.HasPrefix(m.Mountpoint, root+"/") {
			t.Errorf("mount left: %s (%s)", m.Mountpoint, m.FSType)
		}
	}
	for _, cm := range cgroupMounts(ms) {
		if _, err := os.Stat(filepath.Join(cm, parent)); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left: %v", filepath.Join(cm, parent), err)
		}
	}
}

func TestCgroupMounts(t *testing.T) {
	text := `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:26 / /sys/fs/cgroup/blkio rw,nosuid shared:9 - cgroup  rw,blkio
31 22 0:27 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw
40 22 0:50 / /tmp/a\040b/merged rw - overlay overlay rw,lowerdir=/x
32 22 0:28 / /sys/fs/cgroup/blkio rw - cgroup cgroup rw,blkio
`
	ms, err := cgroupfs.ParseMounts(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if got := cgroupMounts(ms); len(got) != 2 || got[0] != "/sys/fs/cgroup/blkio" || got[1] != "/sys/fs/cgroup/unified" {
		t.Errorf("cgroup mounts = %q", got)
	}
}
