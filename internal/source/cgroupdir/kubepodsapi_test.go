package cgroupdir

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

func TestParseKubePods(t *testing.T) {
	t.Parallel()
	// The kubelet's /pods, cut down to what is read.
	in := `{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[
	 {"metadata":{"name":"a","uid":"u1","annotations":{"ddiskqos.level":"4","kubernetes.io/config.source":"file"}}},
	 {"metadata":{"name":"b","uid":"u2"}},
	 {"metadata":{"name":"c","annotations":{"ddiskqos.exempt":"true"}}}]}`
	got, err := parseKubePods(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || len(got["u1"]) != 1 || got["u1"][policy.LabelLevel] != "4" {
		t.Fatalf("parseKubePods = %v, want only u1's ddiskqos.level", got)
	}
	if _, err := parseKubePods(strings.NewReader(`{"items":[`)); err == nil {
		t.Fatal("a truncated list parsed")
	}
}

func TestKubepodsAnnotations(t *testing.T) {
	t.Parallel()
	var level atomic.Value
	level.Store("4")
	var fail atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if fail.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, `{"items":[{"metadata":{"uid":%q,"annotations":{"ddiskqos.level":%q}}}]}`, uidG, level.Load())
	}))
	t.Cleanup(srv.Close)
	mount := t.TempDir()
	mk := func(rel string) {
		if err := os.MkdirAll(filepath.Join(mount, "kubepods", rel), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mk("pod" + uidG + "/" + ctr1)
	s, err := New(Options{Hierarchy: cgroupfs.Hierarchy{Version: 1, Mount: mount}, Parent: "/kubepods", Rescan: time.Hour,
		KubeletPods: srv.URL + "/pods"})
	if err != nil {
		t.Fatal(err)
	}
	ch := run(t, s)
	expectWL(t, ch, 2*time.Second, source.Added, kwl("/kubepods", "pod"+uidG+"/"+ctr1, uidG, ctr1, QoSGuaranteed, policy.LabelLevel, "4"))
	expectSynced(t, ch, 2*time.Second)

	// The annotation changes: the next scan (here a new container's) says so.
	level.Store("2")
	mk("pod" + uidG + "/" + ctr2)
	expectWL(t, ch, 2*time.Second, source.Updated, kwl("/kubepods", "pod"+uidG+"/"+ctr1, uidG, ctr1, QoSGuaranteed, policy.LabelLevel, "2"))
	expectWL(t, ch, 2*time.Second, source.Added, kwl("/kubepods", "pod"+uidG+"/"+ctr2, uidG, ctr2, QoSGuaranteed, policy.LabelLevel, "2"))

	// The kubelet unreachable: the annotations last read are kept.
	fail.Store(true)
	mk("pod" + uidB + "/" + ctr1[:63] + "d")
	expectWL(t, ch, 2*time.Second, source.Added, kwl("/kubepods", "pod"+uidB+"/"+ctr1[:63]+"d", uidB, ctr1[:63]+"d", QoSGuaranteed))
	expectNone(t, ch, 300*time.Millisecond)
}
