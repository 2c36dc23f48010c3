package deploy

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
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
	HostPID     bool           `yaml:"hostPID"`
	HostNetwork bool           `yaml:"hostNetwork"`
	Containers  []k8sContainer `yaml:"containers"`
	Volumes     []struct {
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
		Privileged bool `yaml:"privileged"`
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
	if cfg.Source != config.SourceCgroup || cfg.CgroupParent == "" {
		t.Errorf("source %q, cgroup parent %q: a Kubernetes node has no Docker engine; want the cgroup source", cfg.Source, cfg.CgroupParent)
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
		h := api.NewHandler(func() *snapshot.Snapshot { return tc.snap }, prometheus.NewRegistry(), nil)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, probe.Path, nil))
		if rec.Code != tc.want {
			t.Errorf("GET %s (liveness probe) with a tick %s old: %d %q, want %d",
				probe.Path, now.Sub(tc.snap.At).Round(time.Second), rec.Code, strings.TrimSpace(rec.Body.String()), tc.want)
		}
	}
}
