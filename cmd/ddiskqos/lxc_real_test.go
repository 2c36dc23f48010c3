package main

// LXC as LXC makes it, end to end: Debian's LXC 5 starts real containers
// (the busybox template, no network) with the test's disk bound in, and
// the real `ddiskqos run --source cgroup` binary finds them at the I/O
// hierarchy's root as lxc.payload.NAME, named NAME: on the host's v1 blkio
// (a loop device) and in the test VM's cgroup2 (its disk), where LXC runs
// from the root cgroup.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// lxcDisk is where the test's disk appears inside its containers.
const lxcDisk = "/dev/ddq-disk"

// lxcCmd runs one LXC tool and returns its error with its output.
func lxcCmd(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// lxcContainer creates the container name (busybox template, network
// empty, no AppArmor profile, no console) with r's disk bound in at
// lxcDisk, the only block device its devices cgroup lets it read, and
// destroys it when the test ends, also the cgroups LXC leaves behind. Its
// cgroups go below dir (lxc.cgroup.dir), "" for LXC's default. It does not
// start it.
func lxcContainer(t *testing.T, r *runRig, name, dir string) {
	t.Helper()
	devices := "lxc.cgroup.devices." // v1; on v2 LXC makes them a BPF program
	if r.h.Version == 2 {
		devices = "lxc.cgroup2.devices."
	}
	body := "lxc.net.0.type = empty\nlxc.apparmor.profile = unconfined\nlxc.console.path = none\n" + devices + "deny = a\n"
	for _, allow := range []string{"c *:* m", "b *:* m", "c 1:* rwm", "c 4:* rwm", "c 5:* rwm", "c 136:* rwm",
		fmt.Sprintf("b %d:%d r", r.loop.Major, r.loop.Minor)} {
		body += devices + "allow = " + allow + "\n"
	}
	body += fmt.Sprintf("lxc.mount.entry = %s %s none bind,create=file 0 0\n", r.loop.Path, strings.TrimPrefix(lxcDisk, "/"))
	if dir != "" {
		body += "lxc.cgroup.dir = " + strings.TrimPrefix(dir, "/") + "\n"
	}
	conf := filepath.Join(t.TempDir(), "lxc.conf")
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatal(err)
	}
	// --busybox-path: the template's `command -v busybox` is the applet's
	// own name where /bin/sh is busybox (the VM).
	if err := lxcCmd("lxc-create", "-n", name, "-t", "busybox", "-f", conf, "--", "--busybox-path", busybox); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if lxcCmd("lxc-info", "-n", name) == nil { // not destroyed by the test
			lxcCmd("lxc-stop", "-k", "-n", name) // an error here: not running
			if err := lxcCmd("lxc-destroy", "-n", name); err != nil {
				t.Error(err)
			}
		}
		lxcRemove(t, slices.Concat(lxcCgroups(dir, "lxc.monitor."+name), lxcCgroups(dir, "lxc.pivot")))
		for _, d := range []string{r.h.Mount + dir + "/lxc.payload." + name, "/var/lib/lxc/" + name} {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("%s left after lxc-destroy", d)
			}
		}
	})
}

// lxcCgroups are the patterns of the cgroup dir/leaf in every hierarchy:
// each v1 controller's and cgroup2's (below /sys/fs/cgroup/unified on a
// hybrid host, /sys/fs/cgroup itself on a pure v2 one).
func lxcCgroups(dir, leaf string) []string {
	return []string{path.Join("/sys/fs/cgroup/*", dir, leaf), path.Join("/sys/fs/cgroup", dir, leaf)}
}

// lxcRemove removes the cgroups matching patterns, in order, which LXC
// leaves once a container is gone: its monitor's lxc.monitor.NAME,
// lxc.pivot (where the monitor moves itself to remove its own cgroup;
// empty once the monitor exits, or another container's, then left to it),
// and the lxc.cgroup.dir they were in.
func lxcRemove(t *testing.T, patterns []string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var busy []error
		for _, p := range patterns {
			dirs, _ := filepath.Glob(p)
			for _, d := range dirs {
				if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
					busy = append(busy, err)
				}
			}
		}
		if len(busy) == 0 {
			return
		}
		if time.Now().After(deadline) {
			for _, err := range busy {
				if strings.Contains(err.Error(), "/lxc.pivot") {
					t.Logf("left in place (another container's?): %v", err)
				} else {
					t.Errorf("LXC's cgroup: %v", err)
				}
			}
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lxcWorkload is the tracked workload named name, or nil.
func lxcWorkload(s *snapshot.Snapshot, name string) *snapshot.Workload {
	for _, w := range s.Workloads {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// knobFiles reads every file of cgroup dir that ddiskqos may write:
// blkio's weights and throttle limits on v1, io.*weight and io.max on v2.
func knobFiles(t *testing.T, h cgroupfs.Hierarchy, dir string) map[string]string {
	t.Helper()
	if h.Version == 1 {
		return blkioFiles(t, dir)
	}
	out := map[string]string{}
	for _, n := range []string{"io.bfq.weight", "io.weight", "io.max"} {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err == nil {
			out[n] = string(b)
		} else if !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no io weight or io.max file in %s", dir)
	}
	return out
}

// TestRealV1LXC, TestRealV2LXC: the daemon over real LXC containers, with
// the lxc layout found by auto at the root (--cgroup-parent /), given as
// the README's command, and found by auto below the containers'
// lxc.cgroup.dir (--cgroup-parent that dir). Container A (the disk bound in) is tracked by
// its name, never its monitor; it reads 256 MiB with O_DIRECT from inside
// (lxc-attach, busybox dd), which the kernel charges to its cgroup and the
// daemon counts, is demoted to level 4 and its BFQ weight file reads the
// level's 100; B, started while the daemon runs, is picked up, and dropped
// once destroyed; after SIGTERM every knob file of A and of A's monitor
// reads as before the daemon started (in the auto run A had a weight of
// its own, 300, before).
func TestRealV1LXC(t *testing.T) {
	testkit.HostOnly(t)
	lxcTest(t, newRunRig)
}

func TestRealV2LXC(t *testing.T) {
	testkit.VMOnly(t)
	lxcTest(t, func(t *testing.T) *runRig {
		r := newV2RunRig(t, "lxc")
		testkit.SetScheduler(t, r.loop.Name, "bfq")
		return r
	})
}

func lxcTest(t *testing.T, rig func(*testing.T) *runRig) {
	for _, bin := range []string{"lxc-create", "lxc-start", "lxc-attach", "lxc-info", "lxc-stop", "lxc-destroy", "busybox"} {
		_, err := exec.LookPath(bin)
		testkit.Need(t, err == nil, "%s not found (apt-get install -y lxc busybox-static): %v", bin, err)
	}
	if _, err := os.Stat("/usr/share/lxc/templates/lxc-busybox"); err != nil {
		testkit.Need(t, false, "LXC's busybox template: %v (apt-get install -y lxc)", err)
	}
	readme := readmeCommand(t, "--cgroup-layout lxc")
	cgdir := fmt.Sprintf("/ddq-lxc-%d", os.Getpid())
	for _, tc := range []struct {
		name string
		args []string
		dir  string // lxc.cgroup.dir; "": LXC's default
		own  uint64 // a weight A has before the daemon starts; 0: none
	}{
		{"auto", []string{"run", "--source", "cgroup", "--cgroup-parent", "/"}, "", 300},
		{"readme", readme, "", 0},
		{"cgroup-dir", []string{"run", "--source", "cgroup", "--cgroup-parent", cgdir}, cgdir, 0},
	} {
		t.Run(tc.name, func(t *testing.T) { lxcDaemon(t, rig(t), tc.name, tc.args, tc.dir, tc.own) })
	}
}

// lxcDaemon runs one daemon over LXC containers on r, whose parent cgroup
// is a cgroup at the root that is no LXC container; the containers' cgroups go
// below dir (lxc.cgroup.dir), "" for the root.
func lxcDaemon(t *testing.T, r *runRig, tag string, args []string, dir string, own uint64) {
	a, b := fmt.Sprintf("ddq-%s-a-%d", tag, os.Getpid()), fmt.Sprintf("ddq-%s-b-%d", tag, os.Getpid())
	cgA, monA := dir+"/lxc.payload."+a, dir+"/lxc.monitor."+a
	if dir != "" {
		// Removed after the containers (their cleanups come first).
		t.Cleanup(func() { lxcRemove(t, slices.Concat(lxcCgroups(dir, "lxc.pivot"), lxcCgroups(dir, ""))) })
	}
	lxcContainer(t, r, a, dir)
	if err := lxcCmd("lxc-start", "-n", a); err != nil {
		t.Fatal(err)
	}
	dirA, monDir := r.h.Mount+cgA, r.h.Mount+monA
	if _, err := os.Stat(monDir); err != nil {
		t.Fatalf("LXC made no monitor cgroup beside %s: %v", dirA, err)
	}
	if own != 0 && !r.noBFQ { // without bfq there is no weight of its own to keep
		if err := r.setWeight(t, cgA, strconv.FormatUint(own, 10)); err != nil {
			t.Fatal(err)
		}
	}
	before, monBefore := knobFiles(t, r.h, dirA), knobFiles(t, r.h, monDir)

	start := time.Now()
	d, logs := r.launch(t, append(slices.Clone(args), "--devices", r.loop.Name, "--listen", r.addr, "--state-file", r.state)...)
	r.waitLevel(t, a, 1)
	s, err := r.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.Source, "lxc") {
		t.Errorf("source %q, want the lxc layout", s.Source)
	}
	for _, w := range s.Workloads {
		if !strings.HasPrefix(w.Cgroup, dir+"/lxc.payload.") {
			t.Errorf("workload %q at %s is not an LXC container", w.Name, w.Cgroup)
		}
	}
	if w := lxcWorkload(s, a); w == nil || w.Cgroup != cgA || w.ID != a {
		t.Errorf("A tracked as %+v, want id %q cgroup %s", w, a, cgA)
	}
	t.Logf("%s: A tracked %s after the start, source %s", tag, time.Since(start).Round(time.Millisecond), s.Source)

	// 256 MiB from inside A: more than the four allowances (170 MiB).
	const n = 256 << 20
	if err := lxcCmd("lxc-attach", "-n", a, "--", "dd", "if="+lxcDisk, "of=/dev/null", "bs=1M", fmt.Sprintf("count=%d", n>>20), "iflag=direct"); err != nil {
		t.Fatal(err)
	}
	r.waitLevel(t, a, 4)
	if !r.noBFQ { // without bfq, the caps alone: none while nobody is contended
		wf := filepath.Join(dirA, map[int]string{1: "blkio.bfq.weight_device", 2: "io.bfq.weight"}[r.h.Version])
		got, err := os.ReadFile(wf)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(strings.Split(string(got), "\n"), r.loop.Dev()+" 100") {
			t.Errorf("A at level 4: %s reads %q, want the line %q", wf, got, r.loop.Dev()+" 100")
		}
	}
	// The kernel charged dd's bytes to A's cgroup, on the test's disk.
	c, err := r.h.Open(cgA)
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.ReadIO()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := cgroupfs.DeviceIn(st.Devices, r.dev).RBytes; got != n {
		t.Errorf("the kernel charged A %d bytes read on %s, want the %d its dd read", got, r.loop.Name, n)
	}
	// The daemon counts them (the tick that demoted A may have come before
	// dd's last requests), once: on v1 the loop device's reads of its
	// backing file on the disk below are charged again, and not counted
	// again (were they, it would count twice the bytes). It was seen to
	// count up to nine requests more than the kernel did, all while A was
	// demoted: 0.5-1 MiB on v1 under load, 1-9 MiB in the VM.
	var wa *snapshot.Workload
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if s, err := r.snapshot(); err == nil {
			if wa = lxcWorkload(s, a); wa != nil && wa.ReadBytes >= n {
				break
			}
		}
	}
	switch {
	case wa == nil || wa.ReadBytes < n || wa.ReadBytes > n+n/10:
		t.Errorf("A counted %+v, want read_bytes %d (what its dd read) or at most 10 %% more; the kernel's counters: %+v", wa, n, st.Devices)
	case wa.ReadBytes != n:
		t.Logf("%s: the daemon counted A read_bytes %d, read_ios %d: %d bytes more than the kernel charged on %s; the kernel's counters: %+v",
			tag, wa.ReadBytes, wa.ReadIOs, wa.ReadBytes-n, r.loop.Name, st.Devices)
	}
	t.Logf("%s: A at level 4 %s after the start", tag, time.Since(start).Round(time.Millisecond))

	// B, started while the daemon runs, is picked up and dropped.
	lxcContainer(t, r, b, dir)
	if err := lxcCmd("lxc-start", "-n", b); err != nil {
		t.Fatal(err)
	}
	r.waitLevel(t, b, 1)
	var out, errOut bytes.Buffer
	if code := runStatus([]string{"--addr", r.addr}, &out, &errOut); code != 0 {
		t.Fatalf("status exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{a, b, r.loop.Name} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "monitor") {
		t.Errorf("status shows a monitor:\n%s", out.String())
	}
	t.Logf("%s: status:\n%s", tag, out.String())
	if err := lxcCmd("lxc-stop", "-k", "-n", b); err != nil {
		t.Fatal(err)
	}
	if err := lxcCmd("lxc-destroy", "-n", b); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "B dropped after lxc-destroy", func() bool {
		s, err := r.snapshot()
		return err == nil && lxcWorkload(s, b) == nil && lxcWorkload(s, a) != nil
	})
	// Dropped because the source saw it go (the cgroup watch), not only
	// because its counters could no longer be read.
	waitLog(t, logs, 5*time.Second, "released workload", "workload="+b, "reason=removed")

	stopWith(t, d, syscall.SIGTERM)
	restored := true
	for dir, files := range map[string]map[string]string{dirA: before, monDir: monBefore} {
		now := knobFiles(t, r.h, dir)
		for f, v := range files {
			if now[f] != v {
				restored = false
				t.Errorf("after SIGTERM %s/%s reads %q, was %q before the daemon started", dir, f, now[f], v)
			}
		}
	}
	if !restored {
		return
	}
	t.Logf("%s: after SIGTERM every knob file of A and its monitor reads as before (%d and %d files)", tag, len(before), len(monBefore))
}
