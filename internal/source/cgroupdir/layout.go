package cgroupdir

// The layouts, how auto picks one, and the names of LXC's and podman's
// cgroups (LayoutLXC, LayoutPodman); the kubelet's are in kubepods.go.

import (
	"path/filepath"
	"strings"
)

// Layout says where the workloads sit below the parent.
type Layout string

const (
	// LayoutAuto is LayoutKubepods when the parent's last element is
	// "kubepods" or "kubepods.slice" (the kubelet's cgroup root);
	// LayoutLXC when the parent is the hierarchy's root or, when the
	// source is made, has an lxc.payload.* child (the tree shows LXC);
	// LayoutPodman when the parent is named libpod_parent or, when the
	// source is made, has a libpod-<id> child; else LayoutChildren.
	LayoutAuto Layout = "auto"
	// LayoutChildren: every direct child directory is a workload.
	LayoutChildren Layout = "children"
	// LayoutKubepods: the kubelet's tree. Every container cgroup of every
	// pod is a workload, named pod<uid>/<container id>:
	//
	//	cgroupfs driver                systemd driver
	//	kubepods/pod<uid>/<id>         kubepods.slice/kubepods-pod<uid>.slice/cri-containerd-<id>.scope             Guaranteed
	//	kubepods/burstable/pod<uid>/<id>   .../kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice/<runtime>-<id>.scope   Burstable
	//	kubepods/besteffort/pod<uid>/<id>  .../kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice/<runtime>-<id>.scope BestEffort
	//
	// The systemd driver escapes the uid's dashes as underscores; names
	// carry the uid as Kubernetes prints it. CRI-O's crio-conmon-<id>.scope
	// (its monitor process, not a container) is skipped.
	LayoutKubepods Layout = "kubepods"
	// LayoutLXC: LXC 5's tree. Every child lxc.payload.NAME of the parent
	// is a workload named NAME; LXC makes it, with its monitor's
	// lxc.monitor.NAME beside it, at the hierarchy's root on v1, on v2
	// below the cgroup lxc-start ran in, and below lxc.cgroup.dir when
	// that is set: the parent is that directory ("/" by default). Every
	// other child (lxc.monitor.*, lxc.pivot, the system's own cgroups)
	// is never a workload.
	LayoutLXC Layout = "lxc"
	// LayoutPodman: podman's containers. Every child libpod-<id>
	// (cgroupfs manager, below /libpod_parent) or libpod-<id>.scope
	// (systemd manager, below machine.slice) is a workload named by the
	// 12 first characters of its id, as podman ps shows it, with the
	// whole id as its ID. Podman's monitor, libpod-conmon-<id>.scope or
	// conmon, and anything else is never a workload.
	LayoutPodman Layout = "podman"
)

// autoLayout is LayoutAuto resolved for parent, whose directory is dir
// ("" when parent is invalid).
func autoLayout(parent, dir string) Layout {
	if b := filepath.Base(parent); b == "kubepods" || b == "kubepods.slice" {
		return LayoutKubepods
	}
	if parent == "/" {
		return LayoutLXC
	}
	if filepath.Base(parent) == "libpod_parent" {
		return LayoutPodman
	}
	if dir != "" {
		ents, _ := subdirs(dir) // a parent not there yet shows nothing
		for _, e := range ents {
			if _, ok := lxcName(e); ok {
				return LayoutLXC
			}
			if _, ok := libpodID(e); ok {
				return LayoutPodman
			}
		}
	}
	return LayoutChildren
}

// libpodID is the container id of a podman container's cgroup:
// libpod-<id> (cgroupfs manager) or libpod-<id>.scope (systemd); false
// for podman's monitor (libpod-conmon-<id>.scope) and anything else.
func libpodID(dir string) (string, bool) {
	id, ok := strings.CutPrefix(strings.TrimSuffix(dir, ".scope"), "libpod-")
	if !ok || id == "" || strings.HasPrefix(id, "conmon-") {
		return "", false
	}
	return id, true
}

// shortID is the first 12 characters of a container id, as podman ps
// and docker ps print it.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// lxcPayloadPrefix starts the name of an LXC container's cgroup
// (DEFAULT_PAYLOAD_CGROUP_PREFIX in LXC 5's source).
const lxcPayloadPrefix = "lxc.payload."

// lxcName is the container name of an LXC payload cgroup, lxc.payload.NAME;
// false for anything else (lxc.monitor.NAME, lxc.pivot, ...).
func lxcName(dir string) (string, bool) {
	name, ok := strings.CutPrefix(dir, lxcPayloadPrefix)
	if !ok || name == "" {
		return "", false
	}
	return name, true
}
