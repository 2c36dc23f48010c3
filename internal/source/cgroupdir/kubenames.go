package cgroupdir

// The names an operator of a node reads for the kubelet's containers,
// namespace/pod/container, from the kubelet's own files (LayoutKubepods
// with Options.KubeletLogs).
//
// For every container it starts, the kubelet links
//
//	/var/log/containers/<pod>_<namespace>_<container>-<container id>.log
//
// to the container's log in its pod's log directory,
//
//	<podLogsDir, /var/log/pods>/<namespace>_<pod>_<pod uid>/<container>/<restart>.log
//
// (pkg/kubelet/kuberuntime, the "legacy" symlink log shippers read; its
// form has not changed since Kubernetes 1.x). Pod names, namespaces and
// container names are DNS names, which hold no "_", so the fields split
// unambiguously; the id is containerd's (or CRI-O's) 64-hex container id,
// which is the name of the container's cgroup with the cgroupfs driver
// and the tail of its scope with systemd. A pod's sandbox has no log, nor
// has a container in the moment between its start and its link: both are
// named after the pod of the same uid and their short id,
// <namespace>/<pod>/<12 hex>, as podman's containers are, until (for a
// container) its link names it and the source reports it Updated.

import (
	"os"
	"path/filepath"
	"strings"
)

// Labels the kubepods layout adds when the kubelet's log links name a
// container, under the keys the CRI runtimes use on containers.
const (
	LabelPodNamespace = "io.kubernetes.pod.namespace"
	LabelPodName      = "io.kubernetes.pod.name"
	LabelContainer    = "io.kubernetes.container.name"
)

// kubeLink is what one of the kubelet's log links says.
type kubeLink struct {
	namespace, pod, container, id, uid string
}

// parseKubeLink reads the link name (<pod>_<namespace>_<container>-<id>.log)
// and its target (.../<namespace>_<pod>_<uid>/<container>/<n>.log); uid is
// "" when the target does not have that form.
func parseKubeLink(name, target string) (kubeLink, bool) {
	base, ok := strings.CutSuffix(name, ".log")
	f := strings.Split(base, "_")
	if !ok || len(f) != 3 || strings.Contains(base, "/") {
		return kubeLink{}, false
	}
	i := strings.LastIndex(f[2], "-")
	if i <= 0 || f[0] == "" || f[1] == "" {
		return kubeLink{}, false
	}
	l := kubeLink{pod: f[0], namespace: f[1], container: f[2][:i], id: f[2][i+1:]}
	if !hexID(l.id) {
		return kubeLink{}, false
	}
	dir := filepath.Base(filepath.Dir(filepath.Dir(target))) // <namespace>_<pod>_<uid>
	if t := strings.Split(dir, "_"); len(t) == 3 && t[0] == l.namespace && t[1] == l.pod && t[2] != "" {
		l.uid = t[2]
	}
	return l, true
}

// hexID reports whether s is a 64-hex container id.
func hexID(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// kubeNames reads the kubelet's log links of one directory, keeping what
// each link said (a link's name and target never change) so that a
// rescan reads only the directory and the new links.
type kubeNames struct {
	dir   string
	links map[string]kubeLink // by link name; absent: not a kubelet link
	byID  map[string]kubeLink
	byUID map[string]kubeLink // any container of the pod
	err   error               // of the last read (the directory missing: fs.ErrNotExist)
}

func newKubeNames(dir string) *kubeNames {
	return &kubeNames{dir: dir, links: map[string]kubeLink{}, byID: map[string]kubeLink{}, byUID: map[string]kubeLink{}}
}

// read lists the directory again. On an error the names known before are
// kept: a container keeps its name while the directory cannot be read.
func (k *kubeNames) read() {
	ents, err := os.ReadDir(k.dir)
	if k.err = err; err != nil {
		return
	}
	seen := make(map[string]bool, len(ents))
	for _, e := range ents {
		n := e.Name()
		seen[n] = true
		if _, ok := k.links[n]; ok || e.Type()&os.ModeSymlink == 0 {
			continue
		}
		target, err := os.Readlink(filepath.Join(k.dir, n))
		if err != nil {
			continue // removed meanwhile
		}
		if l, ok := parseKubeLink(n, target); ok {
			k.links[n] = l
		}
	}
	for n := range k.links {
		if !seen[n] {
			delete(k.links, n)
		}
	}
	clear(k.byID)
	clear(k.byUID)
	for _, l := range k.links {
		k.byID[l.id] = l
		if l.uid != "" {
			k.byUID[l.uid] = l
		}
	}
}

// name is what names container id of pod uid: its own link (linked
// true), or one of its pod's (linked false: the sandbox, or a container not
// linked yet); ok false when neither is there.
func (k *kubeNames) name(uid, id string) (l kubeLink, linked, ok bool) {
	if l, ok := k.byID[id]; ok {
		return l, true, true
	}
	if l, ok := k.byUID[uid]; ok {
		l.container, l.id = "", id
		return l, false, true
	}
	return kubeLink{}, false, false
}
