// Package hosttest builds fake /sys and /proc trees in a test's temporary
// directory, shaped like the kernel's (symlinks from /sys/block,
// /sys/class/block and /sys/dev/block into /sys/devices), and a fake Docker
// engine on a unix socket, so host facts and `ddiskqos check` can be tested
// without root and with output that does not depend on the machine.
package hosttest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Tree is a fake host filesystem: Root/sys and Root/proc.
type Tree struct {
	t    testing.TB
	Root string
	Sys  string
	Proc string
}

// New makes an empty tree in t.TempDir().
func New(t testing.TB) *Tree {
	t.Helper()
	root := t.TempDir()
	tr := &Tree{t: t, Root: root, Sys: filepath.Join(root, "sys"), Proc: filepath.Join(root, "proc")}
	tr.Mkdir("sys/block")
	tr.Mkdir("proc")
	return tr
}

// Write creates the file rel (relative to Root) with content.
func (tr *Tree) Write(rel, content string) {
	tr.t.Helper()
	p := filepath.Join(tr.Root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

// Mkdir creates the directory rel (relative to Root).
func (tr *Tree) Mkdir(rel string) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Join(tr.Root, rel), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

// Symlink makes rel (relative to Root) point at target (relative to Root).
func (tr *Tree) Symlink(target, rel string) {
	tr.t.Helper()
	p := filepath.Join(tr.Root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	t, err := filepath.Rel(filepath.Dir(p), filepath.Join(tr.Root, target))
	if err != nil {
		tr.t.Fatal(err)
	}
	if err := os.Symlink(t, p); err != nil {
		tr.t.Fatal(err)
	}
}

// Disk describes one block device.
type Disk struct {
	Name       string
	Dev        string // MAJ:MIN
	Scheduler  string // the scheduler file's content; "" for no file
	Rotational bool
	Sectors    uint64
	// BackingFile is a loop device's; "" leaves loop/backing_file out.
	BackingFile string
	Partitions  []Partition
	Slaves      []string // names under slaves/ (partitions allowed)
	Hidden      bool
}

// Partition is one partition of a Disk.
type Partition struct{ Name, Dev string }

// AddDisk creates the device under sys/devices and its links in sys/block,
// sys/class/block and sys/dev/block, as the kernel lays them out.
func (tr *Tree) AddDisk(d Disk) {
	tr.t.Helper()
	dir := "sys/devices/virtual/block/" + d.Name
	if !strings.HasPrefix(d.Name, "loop") && !strings.HasPrefix(d.Name, "dm-") && !strings.HasPrefix(d.Name, "zram") {
		dir = "sys/devices/pci0000:00/0000:00:05.0/block/" + d.Name
	}
	tr.Write(dir+"/dev", d.Dev+"\n")
	tr.Write(dir+"/size", fmt.Sprintf("%d\n", d.Sectors))
	rot := "0"
	if d.Rotational {
		rot = "1"
	}
	tr.Write(dir+"/queue/rotational", rot+"\n")
	if d.Scheduler != "" {
		tr.Write(dir+"/queue/scheduler", d.Scheduler+"\n")
	}
	if d.Hidden {
		tr.Write(dir+"/hidden", "1\n")
	}
	if strings.HasPrefix(d.Name, "loop") {
		tr.Mkdir(dir + "/loop")
		if d.BackingFile != "" {
			tr.Write(dir+"/loop/backing_file", d.BackingFile+"\n")
		}
	}
	tr.Mkdir(dir + "/slaves")
	tr.Mkdir(dir + "/holders")
	for _, s := range d.Slaves {
		if target, ok := tr.find(s); ok {
			tr.Symlink(target, dir+"/slaves/"+s)
		}
	}
	tr.Symlink(dir, "sys/block/"+d.Name)
	tr.Symlink(dir, "sys/class/block/"+d.Name)
	tr.Symlink(dir, "sys/dev/block/"+d.Dev)
	for _, p := range d.Partitions {
		pdir := dir + "/" + p.Name
		tr.Write(pdir+"/dev", p.Dev+"\n")
		tr.Write(pdir+"/partition", "1\n")
		tr.Symlink(pdir, "sys/class/block/"+p.Name)
		tr.Symlink(pdir, "sys/dev/block/"+p.Dev)
	}
}

// find returns the sys/devices path of a block device or partition already
// added.
func (tr *Tree) find(name string) (string, bool) {
	p, err := filepath.EvalSymlinks(filepath.Join(tr.Root, "sys/class/block", name))
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(tr.Root, p)
	return rel, err == nil
}

// Mountinfo writes proc/self/mountinfo from "mountpoint fstype superopts"
// triples, e.g. "/sys/fs/cgroup/blkio cgroup rw,blkio".
func (tr *Tree) Mountinfo(mounts ...string) {
	tr.t.Helper()
	var b strings.Builder
	b.WriteString("22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n")
	for i, m := range mounts {
		f := strings.Fields(m)
		if len(f) != 3 {
			tr.t.Fatalf("mountinfo %q: want mountpoint fstype superopts", m)
		}
		fmt.Fprintf(&b, "%d 22 0:%d / %s rw,nosuid,nodev,noexec,relatime shared:%d - %s %s %s\n", 30+i, 30+i, f[0], 10+i, f[1], f[1], f[2])
		tr.Mkdir(strings.TrimPrefix(f[0], "/"))
	}
	tr.Write("proc/self/mountinfo", b.String())
}

// Mount appends a filesystem mount to proc/self/mountinfo (written by
// Mountinfo first): mountpoint, its MAJ:MIN, fstype and source, such as
// Mount("/var/lib/docker", "252:0", "xfs", "/dev/mapper/vg-docker").
func (tr *Tree) Mount(mountpoint, dev, fstype, source string) {
	tr.t.Helper()
	p := filepath.Join(tr.Root, "proc/self/mountinfo")
	b, err := os.ReadFile(p)
	if err != nil {
		tr.t.Fatalf("Mount before Mountinfo: %v", err)
	}
	n := strings.Count(string(b), "\n")
	line := fmt.Sprintf("%d 22 %s / %s rw,relatime shared:%d - %s %s rw\n", 100+n, dev, mountpoint, 100+n, fstype, source)
	tr.Write("proc/self/mountinfo", string(b)+line)
}

// Limits writes proc/<pid>/limits with the given open-files and processes
// rows (and the others at their usual values).
func (tr *Tree) Limits(pid, nofileSoft, nofileHard, nproc string) {
	tr.t.Helper()
	row := func(name, soft, hard, unit string) string {
		return fmt.Sprintf("%-25s %-20s %-20s %-10s\n", name, soft, hard, unit)
	}
	tr.Write("proc/"+pid+"/limits",
		row("Limit", "Soft Limit", "Hard Limit", "Units")+
			row("Max cpu time", "unlimited", "unlimited", "seconds")+
			row("Max stack size", "8388608", "unlimited", "bytes")+
			row("Max processes", nproc, nproc, "processes")+
			row("Max open files", nofileSoft, nofileHard, "files")+
			row("Max nice priority", "0", "0", "")+
			row("Max realtime timeout", "unlimited", "unlimited", "us"))
}

// Sysctl writes proc/sys/<name with dots as slashes>.
func (tr *Tree) Sysctl(name, value string) {
	tr.t.Helper()
	tr.Write("proc/sys/"+strings.ReplaceAll(name, ".", "/"), value+"\n")
}

// Bridge creates a bridge netdev with n ports.
func (tr *Tree) Bridge(name string, ports int) {
	tr.t.Helper()
	tr.Mkdir("sys/class/net/" + name + "/bridge")
	tr.Mkdir("sys/class/net/" + name + "/brif")
	for i := 0; i < ports; i++ {
		tr.Mkdir(fmt.Sprintf("sys/class/net/%s/brif/veth%04d", name, i))
	}
}

// Engine is what a fake Docker engine answers.
type Engine struct {
	Version, APIVersion, CgroupDriver, CgroupVersion string
	// StorageDriver and RootDir are /info's Driver and DockerRootDir;
	// empty leaves them out, as engines older than the fields do.
	StorageDriver, RootDir string
}

// FakeEngine serves /version and /info on a unix socket under dir until the
// test ends, and returns its DOCKER_HOST URL.
func FakeEngine(t testing.TB, dir string, e Engine) string {
	t.Helper()
	sock := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("listen %s: %v", sock, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"Version": e.Version, "ApiVersion": e.APIVersion, "MinAPIVersion": "1.12"})
	})
	mux.HandleFunc("GET /info", func(w http.ResponseWriter, _ *http.Request) {
		info := map[string]any{"CgroupDriver": e.CgroupDriver, "CgroupVersion": e.CgroupVersion, "Containers": 0}
		if e.StorageDriver != "" {
			info["Driver"] = e.StorageDriver
		}
		if e.RootDir != "" {
			info["DockerRootDir"] = e.RootDir
		}
		json.NewEncoder(w).Encode(info)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return "unix://" + sock
}

// Scheduler lines as the kernel prints them.
const (
	SchedNone     = "[none] mq-deadline kyber bfq"
	SchedDeadline = "none [mq-deadline] kyber bfq"
	SchedBFQ      = "none mq-deadline kyber [bfq]"
	SchedCFQ      = "noop deadline [cfq]" // single-queue kernels before 5.0
)

// HybridV1 mounts the v1 controllers (blkio included) and an empty cgroup2
// at /sys/fs/cgroup/unified, as on the test machine, and fills the blkio
// root with what a 6.x kernel with BFQ offers there.
func (tr *Tree) HybridV1(bfq bool) {
	tr.t.Helper()
	tr.Mountinfo(
		"/sys/fs/cgroup/cpu cgroup rw,cpu",
		"/sys/fs/cgroup/memory cgroup rw,memory",
		"/sys/fs/cgroup/blkio cgroup rw,blkio",
		"/sys/fs/cgroup/pids cgroup rw,pids",
		"/sys/fs/cgroup/systemd cgroup rw,name=systemd",
		"/sys/fs/cgroup/unified cgroup2 rw,nsdelegate",
	)
	files := []string{"blkio.reset_stats", "blkio.throttle.io_service_bytes", "blkio.throttle.read_bps_device",
		"blkio.throttle.write_bps_device", "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device", "cgroup.procs"}
	if bfq {
		files = append(files, "blkio.bfq.io_service_bytes", "blkio.bfq.io_serviced")
	}
	for _, f := range files {
		tr.Write("sys/fs/cgroup/blkio/"+f, "")
	}
	tr.Write("sys/fs/cgroup/unified/cgroup.controllers", "\n")
	tr.Write("sys/fs/cgroup/unified/io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
}

// UnifiedV2 mounts only cgroup2 at /sys/fs/cgroup with the io controller
// enabled; iocostQoS is the root's io.cost.qos ("-" for no file).
func (tr *Tree) UnifiedV2(iocostQoS string) {
	tr.t.Helper()
	tr.Mountinfo("/sys/fs/cgroup cgroup2 rw,nsdelegate,memory_recursiveprot")
	tr.Write("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc\n")
	tr.Write("sys/fs/cgroup/cgroup.subtree_control", "cpu io memory pids\n")
	tr.Write("sys/fs/cgroup/io.pressure", "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	tr.Write("sys/fs/cgroup/io.stat", "")
	if iocostQoS != "-" {
		tr.Write("sys/fs/cgroup/io.cost.qos", iocostQoS)
		tr.Write("sys/fs/cgroup/io.cost.model", "")
	}
}

// Sample is the tree the golden files of `ddiskqos check` are made from: a
// hybrid host with BFQ, a virtio disk (mq-deadline) with a partition under
// device-mapper, a rotational SCSI disk on bfq, a backed and an unbacked
// loop device, zram, dockerd with small limits and the kernel's defaults.
func Sample(t testing.TB) *Tree {
	t.Helper()
	tr := New(t)
	tr.HybridV1(true)
	tr.AddDisk(Disk{Name: "vda", Dev: "254:0", Scheduler: SchedDeadline, Rotational: true, Sectors: 41943040,
		Partitions: []Partition{{"vda1", "254:1"}, {"vda2", "254:2"}}})
	tr.AddDisk(Disk{Name: "sda", Dev: "8:0", Scheduler: SchedBFQ, Rotational: true, Sectors: 1953525168})
	tr.AddDisk(Disk{Name: "loop0", Dev: "7:0", Scheduler: SchedNone, Sectors: 204800, BackingFile: "/var/tmp/disk.img"})
	tr.AddDisk(Disk{Name: "loop1", Dev: "7:1", Scheduler: SchedNone})
	tr.AddDisk(Disk{Name: "zram0", Dev: "253:0", Sectors: 8388608})
	tr.AddDisk(Disk{Name: "dm-0", Dev: "252:0", Scheduler: "none", Sectors: 20971520, Slaves: []string{"vda2"}})
	tr.Write("proc/1427/comm", "dockerd\n")
	tr.Write("proc/1/comm", "systemd\n")
	tr.Limits("1427", "20000", "20000", "96365")
	tr.Limits("self", "1024", "524288", "96365")
	tr.Sysctl("kernel.pty.max", "4096")
	tr.Sysctl("kernel.threads-max", "192730")
	tr.Sysctl("kernel.pid_max", "32768")
	tr.Sysctl("fs.inotify.max_user_instances", "128")
	tr.Sysctl("fs.inotify.max_user_watches", "1048576")
	tr.Write("proc/pressure/io", "some avg10=1.50 avg60=0.75 avg300=0.20 total=123456\nfull avg10=1.00 avg60=0.50 avg300=0.10 total=65432\n")
	tr.Bridge("docker0", 3)
	tr.Bridge("br-full", 950)
	tr.Mkdir("sys/class/net/eth0")
	return tr
}
