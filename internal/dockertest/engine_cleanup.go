package dockertest

// What a private engine leaves behind and how it is removed: its containers,
// containerd's shims, mounts and cgroups; and the /proc helpers that find
// and end its processes.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// cleanup removes every trace of the engine: containers (through the API
// while the engine runs, by killing their cgroups and shims otherwise),
// dockerd and its containerd, mounts under the roots, the cgroups under its
// parent in every hierarchy, and the directory.
func (e *Engine) cleanup(t testing.TB) {
	t.Helper()
	if t.Failed() {
		t.Logf("private dockerd log %s:%s", e.logPath, e.logTail(150))
	}
	if e.Pid() != 0 {
		e.removeContainers(t)
		if _, err := e.stop(60 * time.Second); err != nil {
			t.Errorf("stop private engine: %v", err)
		}
	}
	mounts, err := cgroupfs.ReadMounts("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("private engine cleanup: %v", err)
	}
	// Containers left running (the engine was down, or their removal
	// failed): kill their processes by cgroup, then their shims.
	for _, m := range cgroupMounts(mounts) {
		dir := filepath.Join(m, e.cgroupParent)
		if _, err := os.Stat(dir); err == nil {
			testkit.RemoveCgroup(t, dir)
		}
	}
	e.killShims(t)
	if e.vm != nil {
		e.stopVMContainerd(t)
	}
	e.unmountAll(t)
	if err := os.RemoveAll(e.root); err != nil {
		t.Errorf("remove private engine root: %v", err)
	}
}

func (e *Engine) removeContainers(t testing.TB) {
	t.Helper()
	c, err := client.New(client.WithHost(e.Host()))
	if err != nil {
		t.Errorf("client of %s: %v", e.Host(), err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := c.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		t.Errorf("list containers of the private engine: %v", err)
		return
	}
	for _, ct := range list.Items {
		if _, err := c.ContainerRemove(ctx, ct.ID, client.ContainerRemoveOptions{Force: true}); err != nil {
			t.Errorf("remove container %.12s of the private engine: %v", ct.ID, err)
		}
	}
}

// killShims kills the containerd shims of this engine's containerd (left
// when containers outlived the engine) and removes their sockets.
func (e *Engine) killShims(t testing.TB) {
	t.Helper()
	addr := filepath.Join(e.execRoot, "containerd", "containerd.sock")
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		args, err := cmdline(pid)
		if err != nil || len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		flags := shimFlags(args)
		if flags["-address"] != addr {
			continue
		}
		t.Logf("private engine cleanup: killing leftover shim %d %q", pid, args)
		syscall.Kill(pid, syscall.SIGKILL)
		waitGone(pid, 5*time.Second)
		os.Remove(shimSocket(addr, flags["-namespace"], flags["-id"]))
	}
}

// shimSocket is where the shim of container id keeps its socket, as
// containerd 1.6's shim.SocketAddress names it: s/sha256(address/ns/id).
func shimSocket(address, namespace, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(address, namespace, id)))
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", sum))
}

func shimFlags(args []string) map[string]string {
	m := map[string]string{}
	for i := 1; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "-") {
			m[args[i]] = args[i+1]
		}
	}
	return m
}

// unmountAll detaches every mount at or below the engine's root, deepest
// first (overlay and the data root's private bind mount under the data
// root, nsfs under the exec root).
func (e *Engine) unmountAll(t testing.TB) {
	t.Helper()
	for pass := 0; pass < 5; pass++ {
		mounts, err := cgroupfs.ReadMounts("/proc/self/mountinfo")
		if err != nil {
			t.Errorf("private engine cleanup: %v", err)
			return
		}
		var ours []string
		for _, m := range mounts {
			if m.Mountpoint == e.root || strings.HasPrefix(m.Mountpoint, e.root+"/") {
				ours = append(ours, m.Mountpoint)
			}
		}
		if len(ours) == 0 {
			return
		}
		slices.SortFunc(ours, func(a, b string) int { return len(b) - len(a) })
		for _, p := range ours {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
				t.Errorf("unmount %s: %v", p, err)
			}
		}
	}
	t.Errorf("private engine cleanup: mounts left under %s after 5 passes", e.root)
}

// cgroupMounts returns the mount points of every cgroup hierarchy, v1 and v2.
func cgroupMounts(ms []cgroupfs.Mount) []string {
	var out []string
	for _, m := range ms {
		if (m.FSType == "cgroup" || m.FSType == "cgroup2") && !slices.Contains(out, m.Mountpoint) {
			out = append(out, m.Mountpoint)
		}
	}
	return out
}

func cmdline(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), nil
}

// parentPid returns the ppid of pid from /proc/<pid>/stat, 0 if unknown.
func parentPid(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 2 {
		return 0
	}
	pp, _ := strconv.Atoi(f[1])
	return pp
}

// waitGone waits until pid has exited (or is a zombie), up to within.
func waitGone(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(data, ')'); i >= 0 && i+2 < len(data) && data[i+2] == 'Z' {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// killIf kills pid if its command line mentions dir (so a recycled pid is
// left alone).
func killIf(pid int, dir string) {
	args, err := cmdline(pid)
	if err != nil || !strings.Contains(strings.Join(args, " "), dir) {
		return
	}
	syscall.Kill(pid, syscall.SIGKILL)
	waitGone(pid, 5*time.Second)
}
