package cgroupdir

// The names of the kubelet's cgroups (LayoutKubepods): QoS directories, pods, containers.

import (
	"strings"
)

// qosOfDir is the QoS class of a kubepods child that holds pods:
// burstable or besteffort (cgroupfs), kubepods-burstable.slice or
// kubepods-besteffort.slice (systemd).
func qosOfDir(name string) (string, bool) {
	switch name {
	case "burstable", "kubepods-burstable.slice":
		return QoSBurstable, true
	case "besteffort", "kubepods-besteffort.slice":
		return QoSBestEffort, true
	}
	return "", false
}

// podUID is the uid of a pod's directory: pod<uid> (cgroupfs) or
// kubepods[-<qos>]-pod<uid with _ for ->.slice (systemd).
func podUID(name string) (string, bool) {
	if base, ok := strings.CutSuffix(name, ".slice"); ok {
		last := base[strings.LastIndex(base, "-")+1:]
		uid, ok := strings.CutPrefix(last, "pod")
		if !ok || uid == "" || !strings.HasPrefix(base, "kubepods") {
			return "", false
		}
		return strings.ReplaceAll(uid, "_", "-"), true
	}
	uid, ok := strings.CutPrefix(name, "pod")
	return uid, ok && uid != ""
}

// containerID is the id of a container's directory in a pod: <id>
// (cgroupfs) or <runtime>-<id>.scope (systemd: cri-containerd-, crio-,
// docker-). CRI-O's crio-conmon-<id>.scope is its monitor, not a
// container.
func containerID(name string) (string, bool) {
	base, ok := strings.CutSuffix(name, ".scope")
	if !ok {
		return name, name != ""
	}
	if strings.HasPrefix(base, "crio-conmon-") {
		return "", false
	}
	id := base[strings.LastIndex(base, "-")+1:]
	return id, id != ""
}
