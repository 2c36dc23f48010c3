package host

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Status is the verdict of one check.
type Status string

const (
	// StatusOK: as needed.
	StatusOK Status = "ok"
	// StatusWarn: QoS works, but worse than it could, or the host will not
	// reach 10,000 containers; the fix says how to do better.
	StatusWarn Status = "warn"
	// StatusFail: QoS cannot work on this host.
	StatusFail Status = "fail"
	// StatusInfo: nothing ddiskqos needs, but something a container on
	// this host may (real-time scheduling); the fix says how.
	StatusInfo Status = "info"
)

// Check is one finding. Its ID is stable and dotted; scripts may match it.
type Check struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	Value  string `json:"value"`
	Why    string `json:"why"`
	Fix    string `json:"fix"`
}

// Group is the part of the ID before the first dot (cgroup, device, psi,
// docker, limits).
func (c Check) Group() string {
	g, _, _ := strings.Cut(c.ID, ".")
	return g
}

// The limits are sized for the paper's target of 10,000 containers on one
// host (seed: "Docker at insane scale", IBM, 2015, which hit each of them).
const (
	// TargetContainers is the scale the limit checks are sized for.
	TargetContainers = 10_000
	// MinDockerNoFile: the seed sets dockerd's open files to ~10x the
	// containers: each holds several (shim pipes, log file, netns, ...).
	MinDockerNoFile = 10 * TargetContainers
	// MinDockerNProc: >= 3 processes per container, and threads count too.
	MinDockerNProc = 10 * TargetContainers
	// MinTasks bounds threads-max and pid_max: ~10 tasks per container
	// (shim with its threads, init, the application).
	MinTasks = 10 * TargetContainers
	// MinPtyMax: one pty per container started with -t, plus 10% for the
	// host's own sessions (the seed's value: 11000; the default is 4096).
	MinPtyMax = TargetContainers + TargetContainers/10
	// MinInotifyInstances: a per-user limit; without userns remapping every
	// container's root shares uid 0's, and most hold at least one instance
	// (init systems, log followers). Same 10% headroom (default 128).
	MinInotifyInstances = TargetContainers + TargetContainers/10
	// MinInotifyWatches: ~50 watches per container.
	MinInotifyWatches = 50 * TargetContainers
	// MinSelfNoFile: ddiskqos keeps ~3 descriptors per workload (counters,
	// weight file, cgroup directory): 30,000 plus its own sockets.
	MinSelfNoFile = 32_768
	// BridgePortsWarn: warn at ~90% of BR_MAX_PORTS (1024).
	BridgePortsWarn = 900
)

// Evaluate turns facts into checks, in a fixed order: cgroup, device, psi,
// latency, docker, limits. It is pure: it reads nothing.
func Evaluate(f Facts) []Check {
	var cs []Check
	cs = append(cs, cgroupChecks(f)...)
	cs = append(cs, deviceChecks(f)...)
	cs = append(cs, psiChecks(f)...)
	cs = append(cs, latencyChecks(f)...)
	cs = append(cs, dockerChecks(f)...)
	cs = append(cs, limitChecks(f)...)
	return cs
}

// QoSPossible is false when any check failed: then ddiskqos cannot shape
// I/O at all on this host.
func QoSPossible(cs []Check) bool {
	for _, c := range cs {
		if c.Status == StatusFail {
			return false
		}
	}
	return true
}

func cgroupChecks(f Facts) []Check {
	layout := Check{ID: "cgroup.layout",
		Why: "says which files hold I/O counters and weights: v1 and hybrid hosts control block I/O through v1 blkio, v2 hosts through the unified tree (io.*)"}
	if f.LayoutErr != nil {
		layout.Status, layout.Value = StatusFail, "error: "+f.LayoutErr.Error()
		layout.Why = "ddiskqos shapes I/O by writing cgroup files; no cgroup filesystem is mounted to write them in"
		layout.Fix = "mount -t cgroup2 none /sys/fs/cgroup"
		return []Check{layout}
	}
	layout.Status, layout.Value = StatusOK, layoutValue(f.Layout)
	cs := []Check{layout}

	io := Check{ID: "cgroup.io_hierarchy",
		Why: "every mechanism (weights, limits) is a file in this hierarchy, and the containers' cgroups must be in it (Docker's cgroupfs driver: /docker/<id>; systemd driver: system.slice/docker-<id>.scope)"}
	switch {
	case f.IOErr != nil:
		io.Status, io.Value = StatusFail, "none: "+f.IOErr.Error()
		io.Fix = "mount -t cgroup -o blkio blkio /sys/fs/cgroup/blkio"
	case !f.IO.Enabled:
		io.Status, io.Value = StatusFail, fmt.Sprintf("v2 at %s without the io controller", f.IO.Mount)
		io.Fix = "echo +io > " + f.IO.Mount + "/cgroup.subtree_control"
	case f.IO.Version == 1:
		io.Status, io.Value = StatusOK, "v1 blkio at "+f.IO.Mount
	default:
		io.Status, io.Value = StatusOK, "v2 at "+f.IO.Mount+" (io controller enabled)"
	}
	cs = append(cs, io)
	if f.IOErr == nil && f.IO.Enabled {
		cs = append(cs, writebackCheck(f.IO))
	}
	return cs
}

// writebackCheck says who pays for buffered writes. On v1 the page cache
// is written back by the kernel's flusher threads, which live in the root
// blkio cgroup: a container's buffered writes are counted (and weighted,
// and capped) for nobody, except what the writer itself forces out with
// fsync or O_DIRECT. cgroup v2 charges writeback (with the memory
// controller on too) to the cgroup whose memory holds the file's cached
// pages: the first to write or read them, not a later rewriter, and the
// parent once that cgroup is removed; the file moves to the rewriter only
// when the pages written back are mostly its own (cgroup writeback's
// foreign-inode detection). TestRealV2WritebackOwner measures it.
func writebackCheck(io IOHierarchy) Check {
	c := Check{ID: "cgroup.writeback"}
	if io.Version == 1 {
		c.Status = StatusWarn
		c.Value = "v1 blkio: buffered writes are charged to the flusher (root cgroup), not the writer"
		c.Why = "a container's write() lands in the page cache; the kernel's flusher threads write it back later from the root blkio cgroup, " +
			"so those bytes are neither counted against the container's level nor slowed by its weight or cap. " +
			"Reads, O_DIRECT writes, and the pages the writer forces out itself while still dirty (fsync, O_SYNC) are charged to it"
		c.Fix = "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2, with the memory and io controllers enabled for the containers) " +
			"so writeback is charged to the cgroup whose memory holds the file's cached pages: " +
			"the container that wrote or read the file first, not one that rewrites it while it is cached"
		return c
	}
	if !io.Memory {
		c.Status = StatusWarn
		c.Value = "v2 without the memory controller: buffered writes are charged to the root, not the writer"
		c.Why = "cgroup writeback needs the memory controller next to io: without it in " + filepath.Join(io.Mount, "cgroup.subtree_control") +
			" the pages a container dirties belong to the root's memory cgroup, and their writeback to the root's io cgroup"
		c.Fix = "echo +memory > " + filepath.Join(io.Mount, "cgroup.subtree_control") + " (and on each level down to the containers' parent)"
		return c
	}
	c.Status = StatusOK
	c.Value = "v2: charged to the cgroup that cached the pages, not a rewriter"
	c.Why = "cgroup v2 charges writeback, the flusher's and the writer's own fsync alike, to the cgroup whose memory holds the file's cached pages " +
		"(needs the memory controller enabled next to io): buffered writes count against the container that wrote the file first. " +
		"One that rewrites files another container wrote or read while they are cached (a shared volume) is not charged: " +
		"their owner is, or its parent once it is removed, until the pages it writes are mostly its own (after they left the cache)"
	return c
}

func layoutValue(l cgroupfs.Layout) string {
	switch l.Mode {
	case cgroupfs.ModeHybrid:
		return fmt.Sprintf("hybrid: %d v1 hierarchies, cgroup2 at %s", len(l.V1), l.Unified)
	case cgroupfs.ModeV1:
		return fmt.Sprintf("v1: %d hierarchies", len(l.V1))
	default:
		return "v2 at " + l.Unified
	}
}

func deviceChecks(f Facts) []Check {
	if f.DevErr != nil {
		return []Check{{ID: "device.usable", Status: StatusFail, Value: "error: " + f.DevErr.Error(),
			Why: "QoS needs at least one disk that a cgroup mechanism reaches",
			Fix: "mount sysfs: mount -t sysfs sysfs /sys"}}
	}
	var cs []Check
	var usable, weighted []string
	var firstFix string
	targets := 0
	var skipped []string
	skippedBy := map[string][]string{}
	for _, d := range f.Devices {
		if !d.Target {
			if _, seen := skippedBy[d.TargetReason]; !seen {
				skipped = append(skipped, d.TargetReason)
			}
			skippedBy[d.TargetReason] = append(skippedBy[d.TargetReason], d.Name)
			continue
		}
		targets++
		c := Check{ID: "device." + d.Name + ".mechanism", Value: deviceValue(d), Why: d.Reason, Fix: d.Fix}
		switch {
		case d.WeightsEffective:
			c.Status = StatusOK
			weighted = append(weighted, d.Name)
		case d.Mechanism == MechThrottle:
			c.Status = StatusWarn
			c.Why += ". Limits cap a demoted container even when the disk is idle; weights share the disk and waste nothing"
			if strings.Contains(d.Fix, "queue/scheduler") {
				c.Why += fmt.Sprintf(". To keep a scheduler across reboots, a udev rule: ACTION==\"add|change\", KERNEL==\"%s\", ATTR{queue/scheduler}=\"bfq\"", d.Name)
			}
		default:
			c.Status = StatusWarn
		}
		cs = append(cs, c)
		for _, r := range d.NotBeside {
			cs = append(cs, Check{ID: "device." + d.Name + "." + string(r.Mechanism), Status: StatusWarn,
				Value: string(r.Mechanism) + " turned on but not in force", Why: r.Reason})
		}
		if d.IOCost && !d.IOCostCalibrated {
			cs = append(cs, Check{ID: "device." + d.Name + ".iocost_model", Status: StatusWarn,
				Value: "iocost on with the kernel's default model (io.cost.model ctrl=auto)",
				Why:   "iocost shares a disk by weight only while its model says the disk is saturated; a model for the whole device class, not this disk, leaves the disk itself the bottleneck where every container queues alike (measured in the test VM: 1000 vs 100 split 1.1x uncalibrated, 6.6x calibrated)",
				Fix:   "ddiskqos calibrate /dev/" + d.Name + "   # overwrites the disk's data: a disk not yet in use"})
		}
		if d.Mechanism != MechNone {
			usable = append(usable, d.Name)
		} else if firstFix == "" {
			firstFix = d.Fix
		}
	}
	u := Check{ID: "device.usable", Why: "QoS needs at least one disk that a cgroup mechanism reaches; weights (bfq, iocost, cfq) share it in proportion, limits (throttle) only cap"}
	if len(usable) == 0 {
		u.Status, u.Value, u.Fix = StatusFail, "no target device with a working mechanism", firstFix
		if f.IOErr != nil {
			u.Fix = "mount -t cgroup -o blkio blkio /sys/fs/cgroup/blkio"
		}
	} else {
		u.Status = StatusOK
		u.Value = fmt.Sprintf("%d of %d target devices usable, %d with weights", len(usable), targets, len(weighted))
		if len(weighted) > 0 {
			u.Value += ": " + strings.Join(weighted, ", ")
		}
	}
	cs = append(cs, u)
	if len(skipped) > 0 {
		var parts []string
		for _, reason := range skipped {
			parts = append(parts, reason+": "+strings.Join(skippedBy[reason], " "))
		}
		cs = append(cs, Check{ID: "device.skipped", Status: StatusOK, Value: strings.Join(parts, "; "),
			Why: "listed in the JSON with target=false but not shaped: nothing behind them, or memory-backed with no disk time to share"})
	}
	return cs
}

func psiChecks(f Facts) []Check {
	sys := Check{ID: "psi.io",
		Why: "host-wide share of time tasks stall on I/O (PSI): tells a contended disk from a merely busy one, i.e. when demoting heavy containers pays"}
	switch {
	case f.PSIErr != nil:
		sys.Status, sys.Value = StatusWarn, "error: "+f.PSIErr.Error()
	case !f.HasPSI:
		sys.Status, sys.Value = StatusWarn, "not available: no "+f.Roots.proc("pressure", "io")
		sys.Fix = "add psi=1 to the kernel command line (needs CONFIG_PSI=y) and reboot"
	default:
		sys.Status = StatusOK
		sys.Value = fmt.Sprintf("some avg10=%.2f%% avg60=%.2f%%", f.PSI.Some.Avg10, f.PSI.Some.Avg60)
		if f.PSI.HasFull {
			sys.Value += fmt.Sprintf(", full avg10=%.2f%%", f.PSI.Full.Avg10)
		}
	}
	cg := Check{ID: "psi.cgroup",
		Why: "per-container I/O stall time (io.pressure) exists only on cgroup v2; without it each container's contention is judged from its counters alone"}
	switch {
	case f.IOErr != nil:
		cg.Status, cg.Value = StatusWarn, "no I/O hierarchy"
	case f.IO.Version == 1:
		cg.Status, cg.Value = StatusWarn, "not available: I/O is controlled through cgroup v1 blkio, which has no io.pressure"
		cg.Fix = "boot with systemd.unified_cgroup_hierarchy=1 (cgroup v2) and psi=1"
	case f.IO.Pressure:
		cg.Status, cg.Value = StatusOK, "io.pressure at "+f.IO.Mount
	default:
		cg.Status, cg.Value = StatusWarn, "no io.pressure at "+f.IO.Mount
		cg.Fix = "add psi=1 to the kernel command line (needs CONFIG_PSI=y) and reboot"
	}
	return []Check{sys, cg}
}

func dockerChecks(f Facts) []Check {
	if f.Engine == nil {
		return nil
	}
	e := f.Engine
	c := Check{ID: "docker.engine",
		Why: "the Docker source names containers and reads their QoS labels from the engine; without it ddiskqos still works from cgroup directories (the cgroup-parent source)"}
	if !e.Reachable {
		c.Status, c.Value = StatusWarn, fmt.Sprintf("unreachable at %s: %s", e.Host, e.Error)
		c.Fix = "systemctl start docker, or pass --docker-host (default $DOCKER_HOST, else " + DefaultDockerHost + ")"
		return []Check{c}
	}
	c.Status = StatusOK
	c.Value = fmt.Sprintf("%s (API %s) at %s", e.Version, e.APIVersion, e.Host)
	if e.Error != "" {
		c.Status, c.Value = StatusWarn, c.Value+": "+e.Error
		return []Check{c}
	}
	cg := Check{ID: "docker.cgroup", Status: StatusOK,
		Value: fmt.Sprintf("driver %s, cgroup v%s", orUnknown(e.CgroupDriver), orUnknown(e.CgroupVersion)),
		Why:   "the engine must put containers in the hierarchy ddiskqos controls I/O through; the driver says where (cgroupfs: /docker/<id>, systemd: system.slice/docker-<id>.scope)"}
	if e.CgroupVersion != "" && f.IOErr == nil && e.CgroupVersion != strconv.Itoa(f.IO.Version) {
		cg.Status = StatusWarn
		cg.Value += fmt.Sprintf(", but ddiskqos controls I/O through cgroup v%d", f.IO.Version)
		cg.Fix = "run ddiskqos in the host's cgroup namespace with the host's /sys/fs/cgroup (docker run --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup)"
	}
	cs := []Check{c, cg}
	if e.StorageDriver != "" {
		cs = append(cs, storageDriverCheck(f))
	}
	if f.DataRoot != nil {
		cs = append(cs, dataRootCheck(f))
	}
	if f.RT != nil {
		cs = append(cs, rtRuntimeCheck(f))
	}
	return cs
}

// storageDriverCheck says whose cgroup a container's root-filesystem I/O
// is charged to. With overlay2 (kernel overlayfs), btrfs, zfs or
// devicemapper the container's own tasks do it in the kernel, in their
// cgroup. With fuse-overlayfs every read and write of the root
// filesystem is served by a fuse-overlayfs process that runs in dockerd's
// cgroup, so no container's counters see it. vfs gives each container a
// full copy of its image, which dockerd makes (in its own cgroup) when
// the container is created; the container's later I/O is its own.
func storageDriverCheck(f Facts) Check {
	d := f.Engine.StorageDriver
	c := Check{ID: "docker.storage_driver", Status: StatusOK, Value: d,
		Why: "with " + d + " a container's root-filesystem I/O is done by the container's own tasks, so its cgroup counts and shapes it"}
	overlay := "this one lists overlay in /proc/filesystems"
	if !f.Overlay {
		overlay = "this one does not list overlay in /proc/filesystems: modprobe overlay first, or boot a kernel with CONFIG_OVERLAY_FS"
	}
	toOverlay2 := "switch to overlay2 on a kernel with native overlay (" + overlay + "): set \"storage-driver\": \"overlay2\" in /etc/docker/daemon.json " +
		"and systemctl restart docker (images and containers of the old driver are not carried over: pull or build them again)"
	switch d {
	case "fuse-overlayfs":
		c.Status = StatusWarn
		c.Value = d + ": only volumes and devices are controlled"
		c.Why = "every read and write of a container's root filesystem is served by a fuse-overlayfs process in dockerd's cgroup, outside the container's: " +
			"ddiskqos sees 0 B/s for a container writing into its own filesystem and cannot slow it. " +
			"Only I/O to volumes (-v, --mount) and devices (--device) is the container's own"
		c.Fix = toOverlay2
	case "vfs":
		c.Status = StatusWarn
		c.Value = d + ": image copies at container creation are outside any container's cgroup"
		c.Why = "vfs gives each container a full copy of its image, written by dockerd (in its own cgroup) when the container is created: " +
			"that burst, the size of the image per container, is invisible to ddiskqos and competes with every container. " +
			"The container's own reads and writes afterwards are charged to it"
		c.Fix = toOverlay2
	}
	return c
}

// dataRootCheck says which disk holds Docker's data root (container
// filesystems and volumes) and whether the daemon shapes I/O there.
func dataRootCheck(f Facts) Check {
	dr := f.DataRoot
	c := Check{ID: "docker.data_root",
		Why: "container filesystems and volumes live in Docker's data root: ddiskqos can share only a disk it shapes, so the disk under the data root must be one of its devices"}
	if dr.Error != "" {
		c.Status, c.Value = StatusWarn, dr.Dir+": "+dr.Error
		return c
	}
	where := fmt.Sprintf("%s on %s %s at %s", dr.Dir, dr.FSType, dr.Source, dr.Mountpoint)
	if len(dr.Devices) == 0 {
		c.Status = StatusInfo
		c.Value = where + ": no block device under it"
		c.Why = "the data root is on a filesystem without a block device (tmpfs, overlay, a network filesystem): no disk of this host holds its I/O, so there is nothing for ddiskqos to share"
		return c
	}
	c.Value = where + ", device " + strings.Join(dr.Devices, " over ")
	byName := map[string]Device{}
	for _, d := range f.Devices {
		byName[d.Name] = d
	}
	var shaped []string
	for _, name := range dr.Devices {
		if d, ok := byName[name]; ok && Shaped(d, f.DeviceGlobs) {
			shaped = append(shaped, fmt.Sprintf("%s (%s)", name, d.Mechanism))
		}
	}
	if len(shaped) > 0 {
		c.Status = StatusOK
		c.Value += ": shaped on " + strings.Join(shaped, ", ")
		return c
	}
	c.Status = StatusWarn
	c.Value += ": not among the devices ddiskqos shapes"
	top := byName[dr.Devices[0]]
	switch {
	case len(f.DeviceGlobs) > 0:
		c.Fix = fmt.Sprintf("add %s to the daemon's devices: --devices %s,%s (or devices: in its config file)",
			dr.Devices[len(dr.Devices)-1], strings.Join(f.DeviceGlobs, ","), dr.Devices[len(dr.Devices)-1])
	case top.Mechanism == MechNone:
		c.Fix = top.Fix
	case !top.Target:
		c.Why += "; " + top.Name + " is not a target: " + top.TargetReason
		c.Fix = "move the data root to a disk: \"data-root\": \"/path/on/disk\" in /etc/docker/daemon.json, then systemctl restart docker"
	}
	return c
}

// rtRuntimeCheck: from the Red Hat seed (Using SCHED_FIFO in Docker
// containers on RHEL) — on cgroup v1 with RT group scheduling a task may
// use SCHED_FIFO only in a cgroup with cpu.rt_runtime_us above 0, and the
// containers' parent (and every container) starts at 0.
func rtRuntimeCheck(f Facts) Check {
	rt := f.RT
	c := Check{ID: "docker.rt_runtime",
		Why: "a container that needs SCHED_FIFO or SCHED_RR (audio, cyclictest, PTP) gets EPERM unless its cgroup, and the containers' parent " + rt.Parent +
			", have cpu.rt_runtime_us above 0 on cgroup v1; new cgroups start at 0. ddiskqos itself does not need it"}
	switch {
	case rt.Err != nil:
		c.Status, c.Value = StatusWarn, "error: "+rt.Err.Error()
	case !rt.Present:
		c.Status = StatusOK
		c.Value = "no cpu.rt_runtime_us in " + rt.Mount + ": the kernel has no RT group scheduling, real-time tasks are not limited per cgroup"
	case !rt.ParentExists:
		c.Status = StatusInfo
		c.Value = fmt.Sprintf("%s does not exist yet (made at the first container start, with 0); root %d", rt.File(), rt.Root)
		c.Fix = fmt.Sprintf("\"cpu-rt-runtime\": %d in /etc/docker/daemon.json and systemctl restart docker; then docker run --cpu-rt-runtime=%d --cap-add=SYS_NICE --ulimit rtprio=99", rtParentRuntime(rt.Root), rtParentRuntime(rt.Root)/10)
	case rt.Value <= 0:
		c.Status = StatusInfo
		c.Value = fmt.Sprintf("%s = %d: containers cannot use SCHED_FIFO (root %d)", rt.File(), rt.Value, rt.Root)
		c.Fix = fmt.Sprintf("echo %d > %s (until the cgroup is made again; to keep it: \"cpu-rt-runtime\": %d in /etc/docker/daemon.json), then docker run --cpu-rt-runtime=%d --cap-add=SYS_NICE --ulimit rtprio=99",
			rtParentRuntime(rt.Root), rt.File(), rtParentRuntime(rt.Root), rtParentRuntime(rt.Root)/10)
	default:
		c.Status = StatusOK
		c.Value = fmt.Sprintf("%s = %d (root %d): containers started with --cpu-rt-runtime can use SCHED_FIFO", rt.File(), rt.Value, rt.Root)
	}
	return c
}

// rtParentRuntime is what the fix gives the containers' parent: the
// seed's 950000 µs per second, bounded by the root's own runtime (a child
// cannot have more than its parent).
func rtParentRuntime(root int64) int64 {
	if root > 0 && root < 950000 {
		return root
	}
	return 950000
}

func orUnknown(s string) string {
	if s == "" {
		return "?"
	}
	return s
}

func limitChecks(f Facts) []Check {
	var cs []Check
	// One drop-in per key, so applying both fixes keeps both.
	const dropIn = "mkdir -p /etc/systemd/system/docker.service.d && printf '[Service]\\n%[1]s=1048576\\n' > /etc/systemd/system/docker.service.d/ddiskqos-%[1]s.conf && systemctl daemon-reload && systemctl restart docker"
	for _, l := range []struct {
		id, row, unit string
		min           uint64
		key, why      string
	}{
		{"limits.docker.nofile", "Max open files", "open files", MinDockerNoFile, "LimitNOFILE",
			fmt.Sprintf("each container keeps several files open in dockerd (shim pipes, log file, namespaces): the seed raised it to ~10x the containers, %d for %d", MinDockerNoFile, TargetContainers)},
		{"limits.docker.nproc", "Max processes", "processes", MinDockerNProc, "LimitNPROC",
			fmt.Sprintf("RLIMIT_NPROC counts every task (threads too) of the daemon's user; each container runs >= 3 processes: %d for %d containers", MinDockerNProc, TargetContainers)},
	} {
		c := Check{ID: l.id, Why: l.why, Fix: fmt.Sprintf(dropIn, l.key)}
		d := f.Dockerd
		switch {
		case d.Err != nil:
			c.Status, c.Value = StatusWarn, "error: "+d.Err.Error()
			c.Fix = ""
		case d.PID == 0:
			c.Status, c.Value = StatusWarn, "dockerd not found in "+f.Roots.Proc
			c.Fix = ""
		default:
			lim, ok := FindLimit(d.Limits, l.row)
			if !ok {
				c.Status, c.Value = StatusWarn, fmt.Sprintf("no %q row in /proc/%d/limits", l.row, d.PID)
				c.Fix = ""
				break
			}
			c.Value = fmt.Sprintf("soft %s, hard %s (dockerd pid %d)", lim.Soft, lim.Hard, d.PID)
			c.Status = atLeast(lim.Soft, l.min)
			if c.Status == StatusOK {
				c.Fix = ""
			}
		}
		cs = append(cs, c)
	}

	self := Check{ID: "limits.nofile",
		Why: fmt.Sprintf("ddiskqos keeps ~3 files open per workload (counters, weight file, cgroup directory): %d containers need >= %d. Go raises the soft limit to the hard one at start, so the hard limit counts", TargetContainers, MinSelfNoFile)}
	if f.SelfErr != nil {
		self.Status, self.Value = StatusWarn, "error: "+f.SelfErr.Error()
	} else if lim, ok := FindLimit(f.Self, "Max open files"); ok {
		self.Value = fmt.Sprintf("soft %s, hard %s", lim.Soft, lim.Hard)
		self.Status = atLeast(lim.Hard, MinSelfNoFile)
		if self.Status != StatusOK {
			self.Fix = "LimitNOFILE=65536 in ddiskqos.service's [Service], or ulimit -n 65536 in the shell that starts it"
		}
	} else {
		self.Status, self.Value = StatusWarn, "no \"Max open files\" row in "+f.Roots.proc("self", "limits")
	}
	cs = append(cs, self)

	for _, s := range []struct {
		id  string
		v   Sysctl
		min int64
		set int64
		why string
	}{
		{"limits.pty_max", f.PtyMax, MinPtyMax, MinPtyMax,
			fmt.Sprintf("one pseudo-terminal per container started with -t; the default 4096 stops the 4,097th (the seed's last limit): %d for %d containers and the host's sessions", MinPtyMax, TargetContainers)},
		{"limits.threads_max", f.ThreadsMax, MinTasks, 2 * MinTasks,
			fmt.Sprintf("system-wide task limit: ~10 tasks per container (shim and its threads, init, the application), %d for %d; dockerd also caps its own Go threads at 90%% of it (Go's default cap of 10,000 stopped the seed at 2,500-3,333 containers)", MinTasks, TargetContainers)},
		{"limits.pid_max", f.PidMax, MinTasks, 4194304,
			fmt.Sprintf("every task takes a pid: at ~10 tasks per container the default 32768 runs out near 3,000 containers; %d for %d", MinTasks, TargetContainers)},
		{"limits.inotify_instances", f.InotifyInstances, MinInotifyInstances, 16384,
			fmt.Sprintf("per user: without userns remapping all containers' root processes share uid 0's budget, and most hold an instance (init systems, log followers); the default 128 stops them early: %d for %d", MinInotifyInstances, TargetContainers)},
		{"limits.inotify_watches", f.InotifyWatches, MinInotifyWatches, 1048576,
			fmt.Sprintf("per user, shared like the instances: ~50 watches per container, %d for %d", MinInotifyWatches, TargetContainers)},
	} {
		c := Check{ID: s.id, Why: s.why}
		switch {
		case s.v.Err != nil:
			c.Status, c.Value = StatusWarn, "error: "+s.v.Err.Error()
		case !s.v.Present:
			c.Status, c.Value = StatusWarn, s.v.Name+" not present (kernel feature not built)"
		default:
			c.Value = fmt.Sprintf("%s = %d", s.v.Name, s.v.Value)
			c.Status = StatusOK
			if s.v.Value < s.min {
				c.Status = StatusWarn
				c.Fix = fmt.Sprintf("sysctl -w %s=%d && echo '%s = %d' >> /etc/sysctl.d/90-ddiskqos.conf", s.v.Name, s.set, s.v.Name, s.set)
			}
		}
		cs = append(cs, c)
	}

	br := Check{ID: "limits.bridge_ports",
		Why: fmt.Sprintf("each container on a bridge network takes one port, and the kernel caps a bridge at %d (BR_MAX_PORTS = 1<<BR_PORT_BITS, 10); %d containers need several bridges or host/macvlan/ipvlan networking", BrMaxPorts, TargetContainers)}
	switch {
	case f.BridgesErr != nil:
		br.Status, br.Value = StatusWarn, "error: "+f.BridgesErr.Error()
	case len(f.Bridges) == 0:
		br.Status, br.Value = StatusOK, "no Linux bridge"
	default:
		br.Status = StatusOK
		var parts, full []string
		for _, b := range f.Bridges {
			parts = append(parts, fmt.Sprintf("%s %d/%d", b.Name, b.Ports, BrMaxPorts))
			if b.Ports > BridgePortsWarn {
				full = append(full, b.Name)
			}
		}
		br.Value = strings.Join(parts, ", ")
		if len(full) > 0 {
			br.Status = StatusWarn
			br.Fix = "docker network create --driver bridge ddiskqos-net2, and start new containers with --network ddiskqos-net2"
		}
	}
	return append(cs, br)
}

func atLeast(v Rlimit, min uint64) Status {
	if v == Unlimited || uint64(v) >= min {
		return StatusOK
	}
	return StatusWarn
}
