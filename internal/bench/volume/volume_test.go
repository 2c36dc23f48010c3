package volume

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

func TestMissingToolError(t *testing.T) {
	t.Parallel()
	err := error(&MissingToolError{Tool: "mkfs.ext4", Package: PkgE2fsprogs})
	if !strings.Contains(err.Error(), "apt-get install e2fsprogs") {
		t.Errorf("error %q does not say what to install", err)
	}
}

// TestRealVolume: a volume is created, filled, its scheduler changed, and
// Close leaves no loop device, mount, directory or changed scheduler.
func TestRealVolume(t *testing.T) {
	if testkit.InVM() {
		t.Skip("loop volumes are tested on the host")
	}
	testkit.NeedRoot(t)
	if err := CheckTools(); err != nil {
		var mt *MissingToolError
		testkit.Need(t, !errors.As(err, &mt), "%v", err)
		t.Fatal(err)
	}
	ctx := context.Background()
	v := create(t, Options{Size: 128 << 20})
	p, err := v.WriteFile(ctx, "../../f", 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(p, v.Mount+"/") {
		t.Errorf("file %s written outside the mount %s", p, v.Mount)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 3<<20 {
		t.Fatalf("stat %s: %v %v", p, fi, err)
	}
	def, offered, err := v.Scheduler()
	if err != nil || def != v.DefaultScheduler {
		t.Fatalf("scheduler %q (default %q): %v", def, v.DefaultScheduler, err)
	}
	if strings.Contains(strings.Join(offered, " "), "bfq") {
		if err := v.SetScheduler("bfq"); err != nil {
			t.Fatal(err)
		}
		if cur, _, _ := v.Scheduler(); cur != "bfq" {
			t.Errorf("scheduler %q after SetScheduler(bfq)", cur)
		}
	}
	if err := v.SetScheduler("no-such"); err == nil {
		t.Error("SetScheduler(no-such): want an error")
	}
	dev, backing := v.Path, v.Backing
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if err := v.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	out, _ := exec.Command("losetup", "-a").CombinedOutput()
	if strings.Contains(string(out), backing) {
		t.Errorf("%s still attached after Close:\n%s", dev, out)
	}
	if _, err := os.Stat(backing); !os.IsNotExist(err) {
		t.Errorf("backing file %s still there: %v", backing, err)
	}
}

// TestRealVolumeNoLoop: a NoLoop volume is a new directory on /var/tmp's
// file system and the disk under it, found from the file system's device
// number (stat's st_dev against /sys/dev/block): the same disk findmnt
// names for /var/tmp's source, or the disk of that partition. No loop
// device is attached, its scheduler cannot be changed (SetScheduler
// refuses, the scheduler reads as before), and Close removes the
// directory and its files.
func TestRealVolumeNoLoop(t *testing.T) {
	if testkit.InVM() {
		t.Skip("the host's own disk is tested on the host")
	}
	testkit.NeedRoot(t)
	before, _ := exec.Command("losetup", "-a").CombinedOutput()
	ctx := context.Background()
	v := create(t, Options{Size: 128 << 20, NoLoop: true})
	src, err := exec.Command("findmnt", "-n", "-o", "SOURCE", "--target", "/var/tmp").Output()
	if err != nil {
		t.Fatalf("findmnt /var/tmp: %v", err)
	}
	if s := strings.TrimPrefix(strings.TrimSpace(string(src)), "/dev/"); !strings.HasPrefix(s, v.Name) {
		t.Errorf("the disk under /var/tmp: %q, findmnt says %q", v.Name, s)
	}
	if b, err := os.ReadFile("/sys/block/" + v.Name + "/dev"); err != nil || strings.TrimSpace(string(b)) != v.Dev.String() {
		t.Errorf("%s: dev %s, sysfs %q (%v)", v.Name, v.Dev, b, err)
	}
	if v.Backing != "" || !strings.HasPrefix(v.Mount, "/var/tmp/ddiskqos-bench-") {
		t.Errorf("backing %q, files in %q: want none and a new directory in /var/tmp", v.Backing, v.Mount)
	}
	p, err := v.WriteFile(ctx, "f", 3<<20)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 3<<20 || !strings.HasPrefix(p, v.Mount+"/") {
		t.Fatalf("file %s: %v %v", p, fi, err)
	}
	def := v.DefaultScheduler
	if err := v.SetScheduler(def); err != nil {
		t.Errorf("SetScheduler(%s), the scheduler %s has: %v, want nothing done", def, v.Name, err)
	}
	for _, s := range []string{"bfq", "none", "no-such"} {
		if s == def {
			continue
		}
		if err := v.SetScheduler(s); err == nil || !strings.Contains(err.Error(), "not a loop device") {
			t.Errorf("SetScheduler(%s) on %s: %v, want a refusal", s, v.Name, err)
		}
	}
	if cur, _, err := v.Scheduler(); err != nil || cur != def {
		t.Errorf("scheduler of %s %q (%v), want %q as before", v.Name, cur, err, def)
	}
	after, _ := exec.Command("losetup", "-a").CombinedOutput()
	if string(after) != string(before) {
		t.Errorf("losetup -a changed:\n%s\nwas:\n%s", after, before)
	}
	if err := v.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(v.Mount); !os.IsNotExist(err) {
		t.Errorf("%s still there after Close: %v", v.Mount, err)
	}
}

// TestDiskOf: on a fake sysfs, a directory on a partition is its disk
// (the partition's parent in sysfs, its own dev); on a whole disk, that
// disk; a device number with no block device, or a disk without a queue,
// is an error naming the directory or the disk.
func TestDiskOf(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		t.Fatal(err)
	}
	num := fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev))
	fake := func(part bool, queue bool) string {
		sys := t.TempDir()
		disk := filepath.Join(sys, "devices", "virtio0", "block", "vdz")
		node := disk
		if part {
			node = filepath.Join(disk, "vdz1")
			writeFile(t, filepath.Join(node, "partition"), "1\n")
			writeFile(t, filepath.Join(node, "dev"), num+"\n")
		}
		writeFile(t, filepath.Join(disk, "dev"), "254:16\n")
		if queue {
			writeFile(t, filepath.Join(disk, "queue", "scheduler"), "none [mq-deadline]\n")
		}
		for link, to := range map[string]string{filepath.Join(sys, "dev", "block", num): node, filepath.Join(sys, "block", "vdz"): disk} {
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(to, link); err != nil {
				t.Fatal(err)
			}
		}
		return sys
	}
	for _, part := range []bool{true, false} {
		name, dev, err := DiskOf(fake(part, true), dir)
		if err != nil || name != "vdz" || dev.String() != "254:16" {
			t.Errorf("partition %v: %q %s %v, want vdz 254:16", part, name, dev, err)
		}
	}
	if _, _, err := DiskOf(fake(true, false), dir); err == nil || !strings.Contains(err.Error(), "vdz (under "+dir+") has no I/O queue") {
		t.Errorf("a disk without a queue: %v", err)
	}
	if _, _, err := DiskOf(t.TempDir(), dir); err == nil || !strings.Contains(err.Error(), dir+" is on device "+num) {
		t.Errorf("an empty sysfs: %v, want an error naming %s", err, dir)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// create makes a volume that the test's cleanup closes (Close is safe to
// call again after the test's own).
func create(t *testing.T, o Options) *Volume {
	t.Helper()
	v, err := Create(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	return v
}
