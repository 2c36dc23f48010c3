package cgroupdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

func TestParseKubeLink(t *testing.T) {
	t.Parallel()
	const target = "/var/log/pods/prod_web-7d4f_" + uidB + "/nginx/0.log"
	for _, tc := range []struct {
		name, target string
		want         kubeLink
		ok           bool
	}{
		{"web-7d4f_prod_nginx-" + ctr2 + ".log", target, kubeLink{"prod", "web-7d4f", "nginx", ctr2, uidB}, true},
		// A container name with dashes: the id is after the last one.
		{"web-7d4f_prod_log-shipper-" + ctr2 + ".log", "/x/prod_web-7d4f_" + uidB + "/log-shipper/3.log",
			kubeLink{"prod", "web-7d4f", "log-shipper", ctr2, uidB}, true},
		// A target of another form: named, but no uid (no sandbox naming).
		{"web_prod_nginx-" + ctr2 + ".log", "/elsewhere/nginx.log", kubeLink{"prod", "web", "nginx", ctr2, ""}, true},
		// The target's pod is another: no uid.
		{"web_prod_nginx-" + ctr2 + ".log", "/var/log/pods/prod_other_" + uidB + "/nginx/0.log", kubeLink{"prod", "web", "nginx", ctr2, ""}, true},
		{"web_prod_nginx-" + ctr2, target, kubeLink{}, false},               // no .log
		{"web_prod_nginx-" + ctr2[:12] + ".log", target, kubeLink{}, false}, // short id
		{"web_prod_nginx-" + "C2" + ctr2[2:] + ".log", target, kubeLink{}, false},
		{"web_prod_x_nginx-" + ctr2 + ".log", target, kubeLink{}, false}, // four fields
		{"_prod_nginx-" + ctr2 + ".log", target, kubeLink{}, false},
		{"web__nginx-" + ctr2 + ".log", target, kubeLink{}, false},
		{"web_prod_-" + ctr2 + ".log", target, kubeLink{}, false},
		{"web_prod_" + ctr2 + ".log", target, kubeLink{}, false},
		{"web_a/b_nginx-" + ctr2 + ".log", target, kubeLink{}, false}, // never a directory entry's
	} {
		got, ok := parseKubeLink(tc.name, tc.target)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parseKubeLink(%q, %q) = %+v %v, want %+v %v", tc.name, tc.target, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzParseKubeLink: whatever a link's name and target, a link read has
// non-empty names without "_" or "/" and a 64-hex id.
func FuzzParseKubeLink(f *testing.F) {
	f.Add("web_prod_nginx-"+ctr2+".log", "/var/log/pods/prod_web_"+uidB+"/nginx/0.log")
	f.Add("a_b_c-d.log", "")
	f.Fuzz(func(t *testing.T, name, target string) {
		l, ok := parseKubeLink(name, target)
		if !ok {
			return
		}
		for _, s := range []string{l.namespace, l.pod, l.container} {
			if s == "" || strings.ContainsAny(s, "_/") {
				t.Fatalf("%q %q: %+v", name, target, l)
			}
		}
		if !hexID(l.id) {
			t.Fatalf("%q %q: id %q", name, target, l.id)
		}
	})
}

// TestKubepodsNamedByKubeletLogs: with the kubelet's log links, a
// container is named namespace/pod/container and labelled so, its pod's
// sandbox namespace/pod/<short id>, a container of a pod with no link
// keeps its id as name; a link made later renames its container
// (Updated, through inotify on the links' directory, the rescan an hour
// away), and globs match names and ids alike.
func TestKubepodsNamedByKubeletLogs(t *testing.T) {
	t.Parallel()
	mount, logs := t.TempDir(), t.TempDir()
	h := cgroupfs.Hierarchy{Version: 1, Mount: mount}
	mkdir := func(rel string) {
		if err := os.MkdirAll(filepath.Join(mount, "node/kubepods", rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(pod, ns, uid, container, id string) {
		target := filepath.Join("/var/log/pods", ns+"_"+pod+"_"+uid, container, "0.log")
		if err := os.Symlink(target, filepath.Join(logs, pod+"_"+ns+"_"+container+"-"+id+".log")); err != nil {
			t.Fatal(err)
		}
	}
	// Burstable pod web (container nginx, ctr2; sandbox ctr3); BestEffort
	// pod batch (container job, ctr4; linked later); Guaranteed pod ctr1,
	// no link at all.
	mkdir("burstable/pod" + uidB + "/" + ctr2)
	mkdir("burstable/pod" + uidB + "/" + ctr3)
	mkdir("besteffort/pod" + uidBE + "/" + ctr4)
	mkdir("pod" + uidG + "/" + ctr1)
	link("web", "prod", uidB, "nginx", ctr2)
	// Not the kubelet's: ignored.
	os.WriteFile(filepath.Join(logs, "notes.txt"), nil, 0o644)
	os.Symlink("/x", filepath.Join(logs, "a_b_c-d.log"))

	s, err := New(Options{Hierarchy: h, Parent: "/node/kubepods", Rescan: time.Hour, KubeletLogs: logs,
		Exempt: []string{"pod" + uidG + "/*"}, Levels: []LevelGlob{{Glob: "batch/*", Level: 3}, {Glob: "prod/web/*", Level: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	r := "/node/kubepods"
	named := func(w source.Workload, ns, pod, name string, container bool, extra ...string) source.Workload {
		w.Name = ns + "/" + pod + "/" + name
		for k, v := range labels(append([]string{LabelPodNamespace, ns, LabelPodName, pod}, extra...)...) {
			w.Labels[k] = v
		}
		if container {
			w.Labels[LabelContainer] = name
		}
		return w
	}
	ch := run(t, s)
	const within = 2 * time.Second
	expectWL(t, ch, within, source.Added, kwl(r, "besteffort/pod"+uidBE+"/"+ctr4, uidBE, ctr4, QoSBestEffort))
	expectWL(t, ch, within, source.Added, named(kwl(r, "burstable/pod"+uidB+"/"+ctr2, uidB, ctr2, QoSBurstable),
		"prod", "web", "nginx", true, policy.LabelLevel, "2"))
	expectWL(t, ch, within, source.Added, named(kwl(r, "burstable/pod"+uidB+"/"+ctr3, uidB, ctr3, QoSBurstable),
		"prod", "web", ctr3[:12], false, policy.LabelLevel, "2"))
	expectWL(t, ch, within, source.Added, kwl(r, "pod"+uidG+"/"+ctr1, uidG, ctr1, QoSGuaranteed, policy.LabelExempt, "true"))
	expectSynced(t, ch, within)
	expectNone(t, ch, 50*time.Millisecond)

	link("batch", "jobs", uidBE, "job", ctr4)
	expectWL(t, ch, within, source.Updated, named(kwl(r, "besteffort/pod"+uidBE+"/"+ctr4, uidBE, ctr4, QoSBestEffort),
		"jobs", "batch", "job", true))
	expectNone(t, ch, 50*time.Millisecond)
}

// TestKubepodsKubeletLogsMissing: a links directory that does not exist
// leaves the names the ids; the source runs.
func TestKubepodsKubeletLogsMissing(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	if err := os.MkdirAll(filepath.Join(mount, "kubepods", "pod"+uidG, ctr1), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: mount}, Parent: "/kubepods", Rescan: time.Hour,
		KubeletLogs: filepath.Join(mount, "no-such-dir")})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, s)
	expectWL(t, ch, 2*time.Second, source.Added, kwl("/kubepods", "pod"+uidG+"/"+ctr1, uidG, ctr1, QoSGuaranteed))
	expectSynced(t, ch, 2*time.Second)
}
