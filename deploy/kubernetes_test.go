package deploy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// The fields of a DaemonSet this test checks; the rest of the manifest is
// left to Kubernetes.
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
	HostPID                       bool           `yaml:"hostPID"`
	HostNetwork                   bool           `yaml:"hostNetwork"`
	Containers                    []k8sContainer `yaml:"containers"`
	Volumes                       []struct {
		Name     string `yaml:"name"`
		HostPath *struct {
			Path string `yaml:"path"`
			Type string `yaml:"type"`
		} `yaml:"hostPath"`
	} `yaml:"volumes"`
}

type k8sContainer struct {
	Name            string   `yaml:"name"`
	Image           string   `yaml:"image"`
	ImagePullPolicy string   `yaml:"imagePullPolicy"`
	Command         []string `yaml:"command"`
	Args            []string `yaml:"args"`
	Ports           []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	LivenessProbe *struct {
		HTTPGet *struct {
			Path string    `yaml:"path"`
			Port yaml.Node `yaml:"port"`
		} `yaml:"httpGet"`
	} `yaml:"livenessProbe"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext struct {
		Privileged             bool `yaml:"privileged"`
		ReadOnlyRootFilesystem bool `yaml:"readOnlyRootFilesystem"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
		ReadOnly  bool   `yaml:"readOnly"`
	} `yaml:"volumeMounts"`
}

// daemonSet reads the one DaemonSet of the manifest.
func daemonSet(t *testing.T) k8sObject {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("kubernetes", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var found []k8sObject
	for {
		var n yaml.Node
		if err := dec.Decode(&n); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("kubernetes/daemonset.yaml: %v", err)
		}
		var head struct {
			Kind string `yaml:"kind"`
		}
		if err := n.Decode(&head); err != nil {
			t.Fatalf("kubernetes/daemonset.yaml: %v", err)
		}
		if head.Kind != "DaemonSet" {
			continue
		}
		var o k8sObject
		if err := n.Decode(&o); err != nil {
			t.Fatalf("kubernetes/daemonset.yaml: DaemonSet: %v", err)
		}
		found = append(found, o)
	}
	if len(found) != 1 {
		t.Fatalf("kubernetes/daemonset.yaml: %d DaemonSets, want 1", len(found))
	}
	return found[0]
}

func TestDaemonSet(t *testing.T) {
	ds := daemonSet(t)
	pod := ds.Spec.Template.Spec
	for k, v := range ds.Spec.Selector.MatchLabels {
		if ds.Spec.Template.Metadata.Labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, ds.Spec.Template.Metadata.Labels)
		}
	}
	if len(ds.Spec.Selector.MatchLabels) == 0 {
		t.Error("DaemonSet without a selector")
	}
	if pod.HostPID {
		t.Error("hostPID: true; the cgroup source needs no host processes")
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != ImageRef {
		t.Errorf("image %q, want %q (what the README builds)", c.Image, ImageRef)
	}
	if c.ImagePullPolicy != "IfNotPresent" && c.ImagePullPolicy != "Never" {
		t.Errorf("imagePullPolicy %q: the image is loaded into the node, not pulled (IfNotPresent or Never)", c.ImagePullPolicy)
	}
	if !c.SecurityContext.Privileged {
		t.Error("not privileged: it writes the I/O knobs of other pods' cgroups")
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Errorf("resources %+v: want cpu and memory requests and a memory limit", c.Resources)
	}

	// The arguments, through `ddiskqos run`'s own parser. No command:
	// the image's entrypoint is the binary.
	if len(c.Command) != 0 {
		t.Errorf("command %q overrides the image's entrypoint", c.Command)
	}
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("args %q: want run and its flags", c.Args)
	}
	cfg := parseRunArgs(t, c.Args[1:])
	if cfg.Source != config.SourceCgroup || cfg.CgroupLayout != "kubepods" || path.Base(cfg.CgroupParent) != "kubepods.slice" && path.Base(cfg.CgroupParent) != "kubepods" {
		t.Errorf("source %q, cgroup layout %q, cgroup parent %q: a Kubernetes node has no Docker engine; want the cgroup source over the kubelet's tree (kubepods layout, kubepods.slice or kubepods)",
			cfg.Source, cfg.CgroupLayout, cfg.CgroupParent)
	}

	// Mounts: the host's cgroup tree writable where the daemon looks for
	// it, the host's /proc where --path-proc says, the state directory on
	// the host so a restarted pod restores what its predecessor changed.
	hostPaths := map[string]string{} // volume name -> host path
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := func(hostPath, at string, writable bool) {
		t.Helper()
		for _, m := range c.VolumeMounts {
			if m.MountPath == at && hostPaths[m.Name] == hostPath {
				if writable && m.ReadOnly {
					t.Errorf("host %s is mounted read-only at %s", hostPath, at)
				}
				return
			}
		}
		t.Errorf("host %s is not mounted at %s (mounts %+v, volumes %v)", hostPath, at, c.VolumeMounts, hostPaths)
	}
	mounted("/sys/fs/cgroup", filepath.Join(cfg.Paths.Sys, "fs", "cgroup"), true)
	mounted("/proc", cfg.Paths.Proc, false)
	mounted("/run/ddiskqos", filepath.Dir(cfg.StateFile), true)
	if cfg.CgroupKubeletLogs != "" {
		mounted("/var/log/containers", cfg.CgroupKubeletLogs, false)
	}

	// The metrics port is the port the daemon listens on, on every
	// address of the pod.
	host, port, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		t.Fatalf("--listen %q: %v", cfg.Listen, err)
	}
	if host != "0.0.0.0" && host != "" && host != "::" {
		t.Errorf("--listen %q: the kubelet's probe and Prometheus reach the pod's IP, not its loopback", cfg.Listen)
	}
	var portNames []string
	for _, p := range c.Ports {
		if strconv.Itoa(p.ContainerPort) == port {
			portNames = append(portNames, p.Name)
		}
	}
	if len(portNames) == 0 {
		t.Errorf("no containerPort %s (--listen %s) in %+v", port, cfg.Listen, c.Ports)
	}

	// The liveness probe: the daemon's port, and a path its handler serves
	// as the health check (200 on a fresh tick, 503 on a stale one).
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil {
		t.Fatal("no httpGet liveness probe")
	}
	probe := c.LivenessProbe.HTTPGet
	if p := probe.Port.Value; p != port && !slices.Contains(portNames, p) {
		t.Errorf("liveness probe port %q is neither %s nor its name %v", p, port, portNames)
	}
	now := time.Now()
	for _, tc := range []struct {
		snap *snapshot.Snapshot
		want int
	}{
		{&snapshot.Snapshot{At: now, Tick: 5, Interval: cfg.Interval}, http.StatusOK},
		{&snapshot.Snapshot{At: now.Add(-time.Hour), Tick: 5, Interval: cfg.Interval}, http.StatusServiceUnavailable},
	} {
		h := api.NewHandler(snapshot.Fixed(func() *snapshot.Snapshot { return tc.snap }), prometheus.NewRegistry(), nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, probe.Path, nil))
		if rec.Code != tc.want {
			t.Errorf("GET %s (liveness probe) with a tick %s old: %d %q, want %d",
				probe.Path, now.Sub(tc.snap.At).Round(time.Second), rec.Code, strings.TrimSpace(rec.Body.String()), tc.want)
		}
	}
}

// TestRealDaemonSetContainer runs the DaemonSet's container spec on this
// machine's Docker engine — not on Kubernetes: the image built from
// deploy/docker, the manifest's arguments, its hostPath volumes as binds
// (the state directory a temporary one), its read-only root, on a bridge
// network — and probes it as the kubelet would, from outside, at the
// pod's address: the liveness path on the named port must answer 200,
// /metrics must serve the daemon's series, /v1/workloads must name the
// container of a pod in a kubelet-shaped cgroup tree, and SIGTERM must
// stop it with exit 0 within terminationGracePeriodSeconds.
//
// Two differences from the manifest: the kubelet's parent cgroup is not on
// this machine, so a parent of the test's own, holding that small tree, is
// added as the last --cgroup-parent; and the container is not privileged,
// because an engine without CAP_SYS_RESOURCE in its own bounding set (this
// one) cannot start privileged containers at all (runc: "unable to apply
// caps"). The daemon needs no privilege beyond its mounts on Docker
// (TestRealContainerImage writes weights unprivileged).
func TestRealDaemonSetContainer(t *testing.T) {
	testkit.NeedRoot(t)
	ds := daemonSet(t)
	pod := ds.Spec.Template.Spec
	spec := pod.Containers[0]
	c := dockertest.Client(t)
	tag := dockertest.UniqueTag("daemonset")
	makeImage(t, c, tag)
	// A node's tree in small: one Burstable pod with one container, as the
	// kubelet's systemd driver and containerd name them.
	parent := fmt.Sprintf("/ddiskqos-deploy-ds-%d", os.Getpid())
	testkit.Cgroup(t, "/sys/fs/cgroup/blkio"+parent)
	const uid, ctr = "d5e1a2b3-0000-4000-8000-00000000c0de", "c0dec0dec0dec0dec0dec0dec0dec0dec0dec0dec0dec0dec0dec0dec0dec0de"
	podDir := "kubepods-burstable.slice/kubepods-burstable-pod" + strings.ReplaceAll(uid, "-", "_") + ".slice/cri-containerd-" + ctr + ".scope"
	if err := os.MkdirAll("/sys/fs/cgroup/blkio"+parent+"/"+podDir, 0o755); err != nil {
		t.Fatal(err)
	}

	// The kubelet's log link of that container, in a directory standing
	// for the node's /var/log/containers: the container is named
	// namespace/pod/container from it.
	logDir := t.TempDir()
	link := "web-0_shop_app-" + ctr + ".log"
	if err := os.Symlink("/var/log/pods/shop_web-0_"+uid+"/app/0.log", filepath.Join(logDir, link)); err != nil {
		t.Fatal(err)
	}

	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath == nil {
			t.Fatalf("volume %s is not a hostPath", v.Name)
		}
		hostPaths[v.Name] = v.HostPath.Path
	}
	var binds []string
	for _, m := range spec.VolumeMounts {
		src := hostPaths[m.Name]
		switch src {
		case "/run/ddiskqos":
			src = t.TempDir()
		case "/var/log/containers":
			src = logDir
		}
		b := src + ":" + m.MountPath
		if m.ReadOnly {
			b += ":ro"
		}
		binds = append(binds, b)
	}
	args := append(slices.Clone(spec.Args), "--cgroup-parent="+parent)
	id := startContainer(t, c, fmt.Sprintf("ddiskqos-test-deploy-ds-%d", os.Getpid()),
		&container.Config{Image: tag, Cmd: args},
		&container.HostConfig{NetworkMode: "bridge", Binds: binds, ReadonlyRootfs: spec.SecurityContext.ReadOnlyRootFilesystem})
	ctx := context.Background()
	res, err := c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ci := res.Container
	ip := ""
	if n := ci.NetworkSettings; n != nil && n.Networks["bridge"] != nil && n.Networks["bridge"].IPAddress.IsValid() {
		ip = n.Networks["bridge"].IPAddress.String()
	}
	if ip == "" {
		t.Fatalf("container %s has no bridge address", id)
	}
	port := spec.LivenessProbe.HTTPGet.Port.Value
	for _, p := range spec.Ports {
		if p.Name == port {
			port = strconv.Itoa(p.ContainerPort)
		}
	}
	base := "http://" + net.JoinHostPort(ip, port)
	hc := &http.Client{Timeout: 2 * time.Second}
	get := func(path string) (int, string) {
		resp, err := hc.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	var code int
	var body string
	start := time.Now()
	for deadline := start.Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if code, body = get(spec.LivenessProbe.HTTPGet.Path); code == http.StatusOK {
			break
		}
	}
	if code != http.StatusOK {
		o, e := logs(c, id)
		t.Fatalf("GET %s%s (the liveness probe): %d %q after 30 s\n%s%s", base, spec.LivenessProbe.HTTPGet.Path, code, body, o, e)
	}
	t.Logf("liveness probe GET %s%s: 200 %q, %s after start", base, spec.LivenessProbe.HTTPGet.Path, strings.TrimSpace(body), time.Since(start).Round(time.Millisecond))
	if code, body = get("/metrics"); code != http.StatusOK || !strings.Contains(body, "ddiskqos_") {
		t.Errorf("GET %s/metrics: %d, %d bytes, want 200 with ddiskqos_ series", base, code, len(body))
	}
	// The pod's container, found through the kubepods layout of the
	// manifest's arguments and named by its log link.
	want := "shop/web-0/app"
	var names []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !slices.Contains(names, want); time.Sleep(200 * time.Millisecond) {
		names = names[:0]
		code, body = get(api.WorkloadsPath)
		var snap snapshot.Snapshot
		if code == http.StatusOK && json.Unmarshal([]byte(body), &snap) == nil {
			for _, w := range snap.Workloads {
				names = append(names, w.Name)
			}
		}
	}
	if !slices.Contains(names, want) {
		o, e := logs(c, id)
		t.Fatalf("GET %s%s: workloads %q, want %s (the pod's container)\n%s%s", base, api.WorkloadsPath, names, want, o, e)
	}
	t.Logf("the daemon found the pod's container in the kubelet-shaped tree, named %s by its log link", want)

	grace := pod.TerminationGracePeriodSeconds
	stopped := time.Now()
	if _, err := c.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &grace}); err != nil {
		t.Fatal(err)
	}
	if res, err = c.ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err != nil {
		t.Fatal(err)
	}
	ci = res.Container
	if ci.State.ExitCode != 0 || ci.State.OOMKilled {
		o, e := logs(c, id)
		t.Errorf("after SIGTERM: exit %d (grace %d s), want 0\n%s%s", ci.State.ExitCode, grace, o, e)
	}
	t.Logf("SIGTERM: exit %d after %s (grace %d s)", ci.State.ExitCode, time.Since(stopped).Round(time.Millisecond), grace)
}
