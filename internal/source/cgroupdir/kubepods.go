package cgroupdir

// The names of the kubelet's cgroups (LayoutKubepods): QoS directories, pods, containers.

import (
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/source"
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

// kubeWorkload is the kubepods layout's cgroup rel (cg its path) as a
// workload, named and labelled from the kubelet's files and pods where
// they are read, and its QoS class; false when rel is not a container's.
func (s *Source) kubeWorkload(rel, cg string) (source.Workload, string, bool) {
	parts := strings.Split(rel, "/")
	qos := QoSGuaranteed
	if len(parts) == 3 {
		if qos, _ = qosOfDir(parts[0]); qos == "" {
			return source.Workload{}, "", false
		}
		parts = parts[1:]
	}
	if len(parts) != 2 {
		return source.Workload{}, "", false
	}
	uid, ok1 := podUID(parts[0])
	id, ok2 := containerID(parts[1])
	if !ok1 || !ok2 {
		return source.Workload{}, "", false
	}
	wl := source.Workload{ID: "pod" + uid + "/" + id, Name: "pod" + uid + "/" + id, Cgroup: cg,
		Labels: map[string]string{LabelPodUID: uid, LabelQoSClass: qos}}
	if s.kube != nil {
		if l, linked, ok := s.kube.name(uid, id); ok {
			c := shortID(id)
			if linked {
				c = l.container
				wl.Labels[LabelContainer] = l.container
			}
			wl.Name = l.namespace + "/" + l.pod + "/" + c
			wl.Labels[LabelPodNamespace], wl.Labels[LabelPodName] = l.namespace, l.pod
		}
	}
	if s.pods != nil {
		for k, v := range s.pods.byUID[uid] {
			wl.Labels[k] = v
		}
	}
	return wl, qos, true
}
