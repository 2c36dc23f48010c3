package main

// A real kubelet beside ddiskqos (issue 38, item 3): kubelet v1.34 in
// standalone mode (static pods, no API server) over containerd v2, both
// built from the Go module proxy and cached per machine by
// test/kubelet/run.sh, which the test drives (KUBE_SERVE) and which tears
// everything down again. Static pods of the three QoS classes read and
// stream on the test's loop device, passed into each container as a
// hostPath block device; the real `ddiskqos run --source cgroup
// --cgroup-layout kubepods` binary finds their containers in the cgroup
// tree the kubelet and runc made on the host's v1 blkio hierarchy.

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source/cgroupdir"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

const (
	// kubeReadmePods is the kubelet's /pods in the README's command.
	kubeReadmePods = "http://127.0.0.1:10255/pods"
	// kubeDir holds run.sh and the wrapper modules that pin the versions.
	kubeDir = "../../test/kubelet"
	// kubeImage is run.sh's local pause image, which the workload
	// containers run too (with /ddiskqos added).
	kubeImage = "localhost/ddiskqos/pause:1"
	// kubeNode is run.sh's --hostname-override: a static pod's name is
	// <manifest name>-<node>.
	kubeNode = "ddiskqos-kube"
	// kubeNamespace is the static pods' namespace.
	kubeNamespace = "ddiskqos-test"
	// kubeDisk is where the test's loop device appears in each container.
	kubeDisk = "/dev/ddq-disk"
)

// kubeVersion is module's version in the wrapper go.mod at file, as
// run.sh reads it (the require line, not a replace).
func kubeVersion(t *testing.T, file, module string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == module && strings.HasPrefix(f[1], "v") {
			return f[1]
		}
	}
	t.Fatalf("%s: no requirement of %s", file, module)
	return ""
}

// needKubelet skips the test (fails it under DDISKQOS_REQUIRE_REAL=1)
// when something run.sh needs is missing, naming it: root, the tools it
// runs, a Docker engine (to build the pause image), and the kubelet and
// containerd binaries in the cache (make kube-deps builds them: minutes).
func needKubelet(t *testing.T) {
	t.Helper()
	testkit.HostOnly(t)
	testkit.NeedRoot(t)
	for _, c := range []struct{ bin, hint string }{
		{"runc", "apt-get install -y runc"}, {"docker", "the Docker engine builds the pause image"},
		{"jq", "apt-get install -y jq"}, {"curl", "apt-get install -y curl"}, {"go", "run.sh builds the pause binary"},
	} {
		_, err := exec.LookPath(c.bin)
		testkit.Need(t, err == nil, "%s not on PATH (%s): %v", c.bin, c.hint, err)
	}
	if out, err := exec.Command("docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		testkit.Need(t, false, "no Docker engine answers (run.sh builds the pause image with it): %v: %s", err, out)
	}
	cache := os.Getenv("DDISKQOS_KUBE_CACHE")
	if cache == "" {
		cache = "/root/.cache/ddiskqos"
	}
	kv := kubeVersion(t, filepath.Join(kubeDir, "kubelet", "go.mod"), "k8s.io/kubernetes")
	cv := kubeVersion(t, filepath.Join(kubeDir, "containerd", "go.mod"), "github.com/containerd/containerd/v2")
	for _, b := range []string{filepath.Join(cache, "kubelet", kv, "kubelet"), filepath.Join(cache, "containerd", cv, "containerd"),
		filepath.Join(cache, "containerd", cv, "ctr"), filepath.Join(cache, "containerd", cv, "containerd-shim-runc-v2")} {
		_, err := os.Stat(b)
		testkit.Need(t, err == nil, "%s not built (make kube-deps, or KUBE_BUILD_ONLY=1 bash test/kubelet/run.sh: "+
			"several minutes cold, see test/kubelet/README.md): %v", b, err)
	}
}

// kubelet is run.sh in its serving mode: containerd and a standalone
// kubelet whose static pods are the manifests the test writes.
type kubelet struct {
	state, manifests, port string
	logs                   *testkit.SyncBuffer
}

// startKubelet runs run.sh (KUBE_SERVE) with files added to its image
// and returns once the kubelet answers. When the test ends (also when it
// fails) run.sh is sent SIGTERM and tears down what it started; the test
// then checks that nothing of it is left (processes, mounts, the kubepods
// cgroups, its state directory) and removes what is, as an error.
func startKubelet(t *testing.T, files ...string) *kubelet {
	t.Helper()
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var kubepods []string // the kubelet's tree in every hierarchy
	for _, m := range l.V1 {
		kubepods = append(kubepods, filepath.Join(m.Mountpoint, "kubepods"))
	}
	if l.Unified != "" {
		kubepods = append(kubepods, filepath.Join(l.Unified, "kubepods"))
	}
	for _, d := range kubepods {
		if _, err := os.Stat(d); err == nil {
			t.Fatalf("%s exists: another kubelet (or a leftover) owns the kubepods tree", d)
		}
	}
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command("bash", filepath.Join(kubeDir, "run.sh"))
	cmd.Env = append(os.Environ(), "KUBE_SERVE="+ready, "KUBE_NO_BUILD=1", "KUBE_IMAGE_FILES="+strings.Join(files, " "))
	// Should the test binary die (go test's timeout), run.sh still tears down.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	k := &kubelet{logs: &testkit.SyncBuffer{}}
	cmd.Stdout, cmd.Stderr = k.logs, k.logs
	if err := testkit.StartHeld(t, cmd); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() && k.state != "" {
			if b, err := os.ReadFile(filepath.Join(k.state, "kubelet.log")); err == nil {
				t.Logf("kubelet.log (last 60 lines):\n%s", lastLines(string(b), 60))
			}
		}
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("run.sh's teardown: %v", err)
			}
		case <-time.After(3 * time.Minute):
			t.Errorf("run.sh did not tear down within 3 min of SIGTERM; killed")
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() || strings.Contains(k.logs.String(), "left:") {
			t.Logf("run.sh:\n%s", k.logs.String())
		}
		k.checkGone(t, kubepods)
	})
	deadline := time.After(3 * time.Minute)
	for {
		if b, err := os.ReadFile(ready); err == nil {
			for line := range strings.SplitSeq(string(b), "\n") {
				key, v, _ := strings.Cut(line, "=")
				switch key {
				case "STATE":
					k.state = v
				case "MANIFESTS":
					k.manifests = v
				case "RO_PORT":
					k.port = v
				}
			}
			if k.state == "" || k.manifests == "" || k.port == "" {
				t.Fatalf("run.sh's ready file lacks STATE, MANIFESTS or RO_PORT:\n%s", b)
			}
			return k
		}
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			t.Fatalf("run.sh exited before the kubelet answered: %v\n%s", err, k.logs.String())
		case <-deadline:
			t.Fatalf("the kubelet did not answer within 3 min:\n%s", k.logs.String())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// checkGone fails the test for anything of the kubelet's left after
// run.sh's teardown, and removes it.
func (k *kubelet) checkGone(t *testing.T, kubepods []string) {
	t.Helper()
	for _, d := range kubepods {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("%s left after run.sh's teardown (removing)", d)
			testkit.RemoveCgroup(t, d)
		}
	}
	if k.state == "" {
		return
	}
	for pid, cmdline := range processesNaming(k.state) {
		t.Errorf("process %d left after run.sh's teardown (killing): %s", pid, cmdline)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, m := range mountPoints(t) {
		if strings.HasPrefix(m, k.state+"/") {
			t.Errorf("mount %s left after run.sh's teardown (unmounting)", m)
			syscall.Unmount(m, syscall.MNT_DETACH)
		}
	}
	if _, err := os.Stat(k.state); err == nil {
		t.Errorf("state directory %s left after run.sh's teardown (removing)", k.state)
		os.RemoveAll(k.state)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// kubeContainer is one container of a test pod: a name and the
// arguments of /ddiskqos (its workload mode).
type kubeContainer struct {
	name string
	args []string
}

// kubePod is a static pod of the test: its manifest's name, the QoS
// class its resources make, and its containers.
type kubePod struct {
	name, qos   string
	resources   string // each container's resources, as YAML flow
	containers  []kubeContainer
	annotations string // the pod's, as YAML flow ("" none)
}

// manifest is p's static pod: host network (no CNI), the disk passed in
// as a hostPath block device, privileged so that its devices cgroup lets
// the containers open it.
func (p kubePod) manifest(disk string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: %s
  annotations: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  volumes:
  - name: disk
    hostPath: {path: %s, type: BlockDevice}
  containers:
`, p.name, kubeNamespace, cmp.Or(p.annotations, "{}"), disk)
	for _, c := range p.containers {
		args, _ := json.Marshal(append([]string{"/ddiskqos"}, c.args...))
		fmt.Fprintf(&b, `  - name: %s
    image: %s
    imagePullPolicy: Never
    command: %s
    securityContext: {privileged: true}
    volumeMounts: [{name: disk, mountPath: %s}]
    resources: %s
`, c.name, kubeImage, args, kubeDisk, p.resources)
	}
	return b.String()
}

// kubePodStatus is what the test reads of a pod on the kubelet's
// read-only /pods.
type kubePodStatus struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Status struct {
		Phase             string `json:"phase"`
		QOSClass          string `json:"qosClass"`
		ContainerStatuses []struct {
			Name         string `json:"name"`
			ContainerID  string `json:"containerID"` // containerd://<id>
			RestartCount int    `json:"restartCount"`
			State        struct {
				Running *struct{} `json:"running"`
			} `json:"state"`
		} `json:"containerStatuses"`
	} `json:"status"`
}

// pods reads the kubelet's /pods.
func (k *kubelet) pods() ([]kubePodStatus, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+k.port+"/pods", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /pods: %s", resp.Status)
	}
	var list struct {
		Items []kubePodStatus `json:"items"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("GET /pods: %w", err)
	}
	return list.Items, nil
}

// kubeRunning is one container the kubelet reports running: its pod and
// its containerd id.
type kubeRunning struct {
	pod       kubePodStatus
	container string // name in the pod
	id        string // containerd's
	restarts  int
}

// running returns the containers of pods once every container of every
// pod is running, by "<pod>/<container>" (manifest names), within two
// minutes (pods reach Running 2-12 s after the kubelet starts on this
// machine kind, measured, plus the image's import).
func (k *kubelet) running(t *testing.T, pods []kubePod) map[string]kubeRunning {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got, err := k.pods()
		out := map[string]kubeRunning{}
		if err == nil {
			for _, ps := range got {
				for _, p := range pods {
					if ps.Metadata.Name != p.name+"-"+kubeNode || ps.Status.Phase != "Running" {
						continue
					}
					for _, cs := range ps.Status.ContainerStatuses {
						id, ok := strings.CutPrefix(cs.ContainerID, "containerd://")
						if ok && cs.State.Running != nil {
							out[p.name+"/"+cs.Name] = kubeRunning{pod: ps, container: cs.Name, id: id, restarts: cs.RestartCount}
						}
					}
				}
			}
		}
		n := 0
		for _, p := range pods {
			n += len(p.containers)
		}
		if len(out) == n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of the %d containers running after 2 min (last /pods: err %v, %d pods; running %v)", len(out), n, err, len(got), slices.Sorted(maps.Keys(out)))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// podCgroup is where the kubelet's cgroupfs driver puts a pod of class
// qos with uid, below its cgroup root /.
func podCgroup(qos, uid string) string {
	switch qos {
	case cgroupdir.QoSBurstable:
		return "/kubepods/burstable/pod" + uid
	case cgroupdir.QoSBestEffort:
		return "/kubepods/besteffort/pod" + uid
	}
	return "/kubepods/pod" + uid
}

// cmdlines are the command lines of the processes in cgroup dir.
func cmdlines(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, pid := range strings.Fields(string(b)) {
		c, err := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if err == nil {
			out = append(out, strings.TrimSpace(strings.ReplaceAll(string(c), "\x00", " ")))
		}
	}
	return out
}

// metricLine is the first line of the daemon's /metrics of family whose
// labels include every one of labels (k="v"), or "".
func metricLine(t *testing.T, addr, family string, labels ...string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 64<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, family+"{") {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(line, l)
		}
		if ok {
			return line
		}
	}
	return ""
}

// TestRealKubeletStaticPods: a real kubelet's static pods of the three
// QoS classes, on the host's cgroup v1 (cgroupfs driver), and the real
// daemon with --cgroup-layout kubepods on /kubepods. A BestEffort pod
// streams the test's loop device (O_DIRECT, 8 in flight), a Burstable and
// a Guaranteed pod read it at 10 requests of 4 KiB a second (at level 1
// for good under the recent rule, and often enough that the throttle's
// 250 ms hold keeps the streamer capped: at 2 a second /metrics showed no
// cap within 20 s in 2 runs of 5 while the cgroup file held one, a
// ceiling the snapshot does not count as a cap). The daemon tracks
// every container cgroup the kubelet made, the workload containers and
// each pod's sandbox (pause) alike (the kubepods layout takes every child
// of a pod's cgroup; a sandbox does no I/O and stays at level 1), each
// with the id pod<uid>/<id>, named namespace/pod/container from the
// kubelet's /var/log/containers links (the sandbox namespace/pod/<short
// id>) and labelled with its pod's uid, namespace, name, container and the
// QoS class the kubelet gave the pod, in the cgroup the class puts it in.
// The streamer is demoted to level 4 (BFQ weight 100 in its cgroup) and
// capped on the device (blkio.throttle.read_bps_device) while both
// readers, whose reads inside their pods the daemon counts, stay at level
// 1; /metrics (level, weight, cap) and `ddiskqos status` (the names) show
// it; no container restarted; after SIGTERM every blkio file of every
// container cgroup reads as before the daemon started, and when the test
// ends run.sh's teardown leaves no process, mount, kubepods cgroup or
// state of the kubelet's behind.
func TestRealKubeletStaticPods(t *testing.T) {
	needKubelet(t)
	r := newRunRig(t)
	img := filepath.Join(t.TempDir(), "ddiskqos")
	if err := os.WriteFile(img, dockertest.Binary(t), 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	k := startKubelet(t, img)
	t.Logf("kubelet answering %s after run.sh started", time.Since(began).Round(time.Millisecond))

	reader := []string{"workload", "--direct", "--iops", "10", "--duration", "1h", "randread", kubeDisk}
	pods := []kubePod{
		{"ddq-guaranteed", cgroupdir.QoSGuaranteed, "{requests: {cpu: 100m, memory: 64Mi}, limits: {cpu: 100m, memory: 64Mi}}",
			[]kubeContainer{{"reader", reader}}, `{ddiskqos.level: "4"}`},
		{"ddq-burstable", cgroupdir.QoSBurstable, "{requests: {cpu: 50m, memory: 32Mi}}",
			[]kubeContainer{{"reader", reader}}, ""},
		{"ddq-besteffort", cgroupdir.QoSBestEffort, "{}",
			[]kubeContainer{{"streamer", []string{"workload", "--direct", "--iodepth", "8", "--loop", "read", kubeDisk}}}, `{ddiskqos.level: "3"}`},
	}
	for _, p := range pods {
		if err := os.WriteFile(filepath.Join(k.manifests, p.name+".yaml"), []byte(p.manifest(r.loop.Path)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := k.running(t, pods)
	t.Logf("all %d containers running %s after run.sh started", len(run), time.Since(began).Round(time.Millisecond))

	// The cgroups the kubelet made: each pod's in its class's place, with
	// the container's and the sandbox's (running /pause) in it.
	type want struct {
		cgroup, uid, qos, what string // what: <pod>/<container> or <pod>/sandbox
		name                   string // namespace/pod/container, namespace/pod/<short id> for the sandbox
	}
	var wants []want
	byWhat := map[string]string{} // <pod>/<container> → its cgroup
	for _, p := range pods {
		c0 := run[p.name+"/"+p.containers[0].name]
		if c0.pod.Status.QOSClass != p.qos {
			t.Errorf("pod %s: the kubelet gave QoS class %q, want %q", p.name, c0.pod.Status.QOSClass, p.qos)
		}
		pcg := podCgroup(p.qos, c0.pod.Metadata.UID)
		pdir, _ := r.h.Path(pcg)
		ids := map[string]bool{}
		for _, c := range p.containers {
			kr := run[p.name+"/"+c.name]
			ids[kr.id] = true
			cg := pcg + "/" + kr.id
			wants = append(wants, want{cg, kr.pod.Metadata.UID, p.qos, p.name + "/" + c.name,
				kubeNamespace + "/" + kr.pod.Metadata.Name + "/" + c.name})
			byWhat[p.name+"/"+c.name] = cg
		}
		kids, err := subdirNames(pdir)
		if err != nil {
			t.Fatalf("pod %s (%s): %v", p.name, p.qos, err)
		}
		var sandboxes []string
		for _, d := range kids {
			if !ids[d] {
				sandboxes = append(sandboxes, d)
			}
		}
		if len(kids) != len(p.containers)+1 || len(sandboxes) != 1 {
			t.Fatalf("pod %s: cgroups %v in %s, want its %d containers' and one sandbox's", p.name, kids, pcg, len(p.containers))
		}
		sb := pcg + "/" + sandboxes[0]
		if got := cmdlines(t, filepath.Join(pdir, sandboxes[0])); !slices.Equal(got, []string{"/pause"}) {
			t.Errorf("pod %s: the sandbox's cgroup %s runs %q, want /pause", p.name, sb, got)
		}
		wants = append(wants, want{sb, c0.pod.Metadata.UID, p.qos, p.name + "/sandbox",
			kubeNamespace + "/" + c0.pod.Metadata.Name + "/" + sandboxes[0][:12]})
	}
	before := map[string]map[string]string{}
	for _, w := range wants {
		dir, _ := r.h.Path(w.cgroup)
		before[dir] = blkioFiles(t, dir)
	}

	d, _ := r.launch(t, "run", "--source", "cgroup", "--cgroup-parent", "/kubepods", "--cgroup-layout", "kubepods",
		"--listen", r.addr, "--state-file", r.state, "--devices", r.loop.Name)
	streamer := byWhat["ddq-besteffort/streamer"]
	readers := []string{byWhat["ddq-guaranteed/reader"], byWhat["ddq-burstable/reader"]}
	at := func(s *snapshot.Snapshot, cg string) *snapshot.Workload {
		for _, w := range s.Workloads {
			if w.Cgroup == cg {
				return w
			}
		}
		return nil
	}
	dstart := time.Now()
	s := waitSnapshot(t, r, "the streamer at level 4, both readers at 1 and counted", 2*time.Minute, func(s *snapshot.Snapshot) bool {
		ws := at(s, streamer)
		ok := ws != nil && ws.Level == 4
		for _, cg := range readers {
			w := at(s, cg)
			ok = ok && w != nil && w.Level == 1 && w.ReadBytes > 0
		}
		return ok
	})
	t.Logf("streamer at level 4, readers at 1, %s after the daemon started", time.Since(dstart).Round(time.Millisecond))
	if !strings.Contains(s.Source, "kubepods") {
		t.Errorf("source %q, want the kubepods layout", s.Source)
	}
	if len(s.Workloads) != len(wants) {
		var got []string
		for _, w := range s.Workloads {
			got = append(got, w.Cgroup)
		}
		t.Errorf("%d workloads %v, want the %d container and sandbox cgroups of the 3 pods", len(s.Workloads), got, len(wants))
	}
	var names []string
	for _, w := range wants {
		wl := at(s, w.cgroup)
		if wl == nil {
			t.Errorf("%s (%s) not tracked", w.what, w.cgroup)
			continue
		}
		id := "pod" + w.uid + "/" + filepath.Base(w.cgroup)
		names = append(names, w.name)
		if wl.Name != w.name || wl.ID != id {
			t.Errorf("%s tracked as id %q name %q, want id %q name %q (from the kubelet's /var/log/containers)", w.what, wl.ID, wl.Name, id, w.name)
		}
		ns, rest, _ := strings.Cut(w.name, "/")
		pod, ctr, _ := strings.Cut(rest, "/")
		if strings.HasSuffix(w.what, "/sandbox") {
			ctr = ""
		}
		if wl.Labels[cgroupdir.LabelPodUID] != w.uid || wl.Labels[cgroupdir.LabelQoSClass] != w.qos ||
			wl.Labels[cgroupdir.LabelPodNamespace] != ns || wl.Labels[cgroupdir.LabelPodName] != pod || wl.Labels[cgroupdir.LabelContainer] != ctr {
			t.Errorf("%s labelled %v, want pod uid %s, QoS %s, namespace %s, pod %s, container %q", w.what, wl.Labels, w.uid, w.qos, ns, pod, ctr)
		}
		if strings.HasSuffix(w.what, "/sandbox") && wl.Level != 1 {
			t.Errorf("%s (%s) at level %d, want 1 (a sandbox does no I/O)", w.what, w.cgroup, wl.Level)
		}
	}
	if v, _ := r.weight(t, streamer); v != 100 {
		t.Errorf("streamer (%s) at level 4: blkio.bfq.weight_device for %s is %d, want 100", streamer, r.loop.Name, v)
	}

	// Capped: the throttle beside the weights holds the streamer's reads
	// on the device while a better level reads there.
	var capped cgroupfs.Limits
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var err error
		if capped, err = r.h.ReadLimits(streamer, r.dev); err == nil && capped.RBps > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the streamer not capped on %s (blkio.throttle.read_bps_device) within 90 s at level 4: %+v, %v", r.loop.Name, capped, err)
		}
	}
	sname := kubeNamespace + "/" + run["ddq-besteffort/streamer"].pod.Metadata.Name + "/streamer"
	if line := metricLine(t, r.addr, "ddiskqos_workload_level", `name="`+sname+`"`); !strings.HasSuffix(line, " 4") {
		t.Errorf("/metrics: ddiskqos_workload_level of the streamer: %q, want 4", line)
	}
	if line := metricLine(t, r.addr, "ddiskqos_workload_weight", `name="`+sname+`"`); !strings.HasSuffix(line, " 100") {
		t.Errorf("/metrics: ddiskqos_workload_weight of the streamer: %q, want 100", line)
	}
	// The daemon says so too: the throttle's cap in force on the device,
	// in its /metrics (polled: the cap is lifted 250 ms after the readers'
	// last request).
	var applied []snapshot.Applied
	capLine, seen := "", 0
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && capLine == ""; time.Sleep(50 * time.Millisecond) {
		s, err := r.snapshot()
		if err != nil {
			continue
		}
		if w := at(s, streamer); w != nil {
			applied = w.Applied
		}
		if i := slices.IndexFunc(applied, func(a snapshot.Applied) bool { return a.Device == r.loop.Name }); i >= 0 && applied[i].Throttled && applied[i].ReadBps > 0 {
			seen++
		}
		if l := metricLine(t, r.addr, "ddiskqos_workload_cap_bytes_per_second", `name="`+sname+`"`, `device="`+r.loop.Name+`"`, `operation="read"`); l != "" && !strings.HasSuffix(l, " 0") {
			capLine = l
		}
	}
	if capLine == "" {
		c, _ := r.h.ReadLimits(streamer, r.dev)
		t.Errorf("within 20 s the streamer's snapshot showed a read cap on %s %d times (last %+v), /metrics %q; its cgroup's cap now %+v",
			r.loop.Name, seen, applied, capLine, c)
	} else {
		t.Logf("/metrics: %s (the API's snapshots showed the cap %d times meanwhile)", capLine, seen)
	}
	statusShows(t, r, names...)
	t.Logf("streamer capped at %d B/s read on %s", capped.RBps, r.loop.Name)

	// The same containers throughout: none restarted (a reader that could
	// not open the disk would have, over and over).
	for what, kr := range k.running(t, pods) {
		if kr.id != run[what].id || kr.restarts != 0 {
			t.Errorf("%s: container %s (%d restarts), was %s when the daemon started", what, kr.id, kr.restarts, run[what].id)
		}
	}

	stopWith(t, d, syscall.SIGTERM)
	checkRestored(t, before)
	checkStateFile(t, r.state)
	t.Logf("after SIGTERM every blkio file of the %d container cgroups reads as before", len(before))

	// A second daemon on the same pods: --cgroup-exempt-guaranteed leaves
	// the Guaranteed pod's container and sandbox alone (its pod's
	// ddiskqos.level annotation notwithstanding: the flag wins), a
	// --cgroup-levels glob on the names the kubelet's links gave pins the
	// Burstable reader (the glob names namespace/pod/container, not ids),
	// and with --cgroup-kubelet-pods the BestEffort pod's ddiskqos.level
	// annotation, read from the kubelet's /pods, pins the streamer at 3
	// (the first daemon, without the flag, put it at 4).
	state2 := filepath.Join(t.TempDir(), "state.json")
	pin := kubeNamespace + "/ddq-burstable-*/reader"
	// The daemon is the README's Kubernetes command, with the rig's
	// kubelet port for the README's 10255.
	args := readmeCommand(t, "--cgroup-layout kubepods")
	for i, a := range args {
		if a == kubeReadmePods {
			args[i] = "http://127.0.0.1:" + k.port + "/pods"
		}
	}
	if !slices.Contains(args, "--cgroup-exempt-guaranteed") || !slices.Contains(args, "http://127.0.0.1:"+k.port+"/pods") {
		t.Fatalf("the README's kubepods command %q lacks --cgroup-exempt-guaranteed or --cgroup-kubelet-pods %s", args, kubeReadmePods)
	}
	d2, _ := r.launch(t, append(args, "--cgroup-levels", pin+"=2",
		"--listen", r.addr, "--state-file", state2, "--devices", r.loop.Name)...)
	gpod := run["ddq-guaranteed/reader"].pod.Metadata.UID
	s = waitSnapshot(t, r, "the Guaranteed pod exempt, the Burstable reader pinned at 2, the streamer pinned at 3 by its pod's annotation", time.Minute, func(s *snapshot.Snapshot) bool {
		ws, wb := at(s, streamer), at(s, byWhat["ddq-burstable/reader"])
		return len(s.Workloads) == len(wants) && ws != nil && ws.Level == 3 && ws.Pinned && wb != nil && wb.Level == 2 && wb.Pinned
	})
	if ws := at(s, streamer); ws.Labels[policy.LabelLevel] != "3" {
		t.Errorf("streamer labelled %v, want %s=3 from its pod's annotation", ws.Labels, policy.LabelLevel)
	}
	if v, _ := r.weight(t, streamer); v != 250 {
		t.Errorf("streamer pinned at level 3 by its pod's annotation: blkio.bfq.weight_device for %s is %d, want 250", r.loop.Name, v)
	}
	for _, w := range wants {
		wl := at(s, w.cgroup)
		if g := w.uid == gpod; wl == nil || wl.Exempt != g || g && wl.Weight != 0 {
			t.Errorf("%s with --cgroup-exempt-guaranteed: %+v, want exempt %v", w.what, wl, g)
		}
	}
	if v, ok := r.weight(t, byWhat["ddq-guaranteed/reader"]); ok && v != 0 {
		t.Errorf("the exempt Guaranteed reader's blkio.bfq.weight_device has %d for %s, want nothing of the daemon's", v, r.loop.Name)
	}
	stopWith(t, d2, syscall.SIGTERM)
	checkRestored(t, before)
	checkStateFile(t, state2)
	t.Logf("second daemon: Guaranteed exempt, %s pinned at 2, the streamer at 3 by annotation, restored; %s in all", pin, time.Since(began).Round(time.Millisecond))
}

// readmeCommand is the README's one `ddiskqos run` command whose line
// holds marker (a comment after # aside), as arguments after `ddiskqos`.
func readmeCommand(t *testing.T, marker string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	var found [][]string
	for line := range strings.SplitSeq(string(b), "\n") {
		cmd, _, _ := strings.Cut(line, "#")
		f := strings.Fields(cmd)
		if len(f) > 2 && f[0] == "ddiskqos" && f[1] == "run" && strings.Contains(cmd, marker) {
			found = append(found, f[1:])
		}
	}
	if len(found) != 1 {
		t.Fatalf("README.md has %d `ddiskqos run ... %s` commands, want exactly 1: %q", len(found), marker, found)
	}
	return found[0]
}

// subdirNames lists the child directories of dir.
func subdirNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
