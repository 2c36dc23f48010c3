// Package host reads the facts of a host that decide how ddiskqos can shape
// disk I/O there, and checks them: the cgroup layout and the hierarchy that
// controls block I/O, every block device with the mechanism that reaches it
// (bfq-weight, iocost-weight, cfq-weight, throttle, none), pressure stall
// information, the Docker engine, and the kernel and daemon limits a host of
// 10,000 containers runs into. It also says what cannot be controlled: the
// engine's storage driver (fuse-overlayfs does a container's
// root-filesystem I/O in dockerd's cgroup), buffered writes on cgroup v1
// (charged to the flusher), the disks under Docker's data root and whether
// the daemon shapes them, and cpu.rt_runtime_us of the containers' parent.
//
// Reading is split from deciding. Gather, Devices and ProbeIOHierarchy read
// files below Roots (never a hard-coded /sys or /proc); the choice of a
// device's mechanism (each mechanism's probe, in internal/mech) and
// Evaluate are pure and table-tested; every parser of kernel text takes an
// io.Reader and is fuzzed. A file that exists only when a kernel feature is
// on (PSI, iocost, a sysctl) being absent is "no data", not an error.
//
// Which devices are targets: every disk of /sys/block is listed, sorted by
// name (partitions share their disk's request queue, so cgroup I/O control
// is per disk; ResolveDisk maps a partition or MAJ:MIN to it). Hidden NVMe
// multipath paths are left out. Loop devices without a backing file, empty
// drives (size 0) and memory-backed devices (zram, ram) are listed with
// target=false and not checked: the first two have no I/O, the last have no
// disk time to share. Stacked devices (dm, md) are targets with the
// throttle mechanism, and name the disks under them where weights work.
package host
