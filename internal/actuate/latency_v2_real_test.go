package actuate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
)

// TestRealV2IOLatency: io.latency beside the throttle, on the VM's disk
// (make test-v2): the probe finds it, a level-1 workload gets the target
// in the kernel's io.latency and worse levels none, a demotion removes it,
// and RestoreAll puts back what each cgroup had — none, or a target of its
// own set before the daemon.
func TestRealV2IOLatency(t *testing.T) {
	r := newV2Rig(t, "mq-deadline")
	hi, lo, own := r.child(t, "hi"), r.child(t, "lo"), r.child(t, "own")
	file := func(cg string) string {
		t.Helper()
		p, _ := r.h.Path(cg)
		b, err := os.ReadFile(filepath.Join(p, "io.latency"))
		if err != nil {
			t.Fatalf("io.latency of %s: %v (kernel without CONFIG_BLK_CGROUP_IOLATENCY?)", cg, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if dev, rest, ok := strings.Cut(line, " "); ok && dev == r.dev.String() {
				return rest
			}
		}
		return ""
	}
	ownPath, _ := r.h.Path(own)
	if err := os.WriteFile(filepath.Join(ownPath, "io.latency"), []byte(r.dev.String()+" target=50000"), 0); err != nil {
		t.Fatal(err)
	}
	m, err := mech.Lookup(mech.IOLatency)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Probe(mech.Env{H: r.h, Dev: r.dev, Name: r.name, Scheduler: "mq-deadline"}); err != nil {
		t.Fatalf("probe: %v", err)
	}
	dev := Device{Name: r.name, Dev: r.dev, Mech: mech.Throttle, Also: []mech.Name{mech.IOLatency}}
	a, err := New(Config{Hierarchy: r.h, Devices: []Device{dev}, Params: mech.Params{LatencyTarget: 20000}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.RestoreAll() })
	apply := func(hiLevel, ownLevel int) {
		t.Helper()
		st, err := a.Apply(time.Now(), []Target{{ID: "hi", Cgroup: hi, Level: hiLevel, Weight: 1000},
			{ID: "lo", Cgroup: lo, Level: 4, Weight: 100}, {ID: "own", Cgroup: own, Level: ownLevel, Weight: 1000}})
		if err != nil {
			t.Fatal(err)
		}
		if len(st) != 1 || st[0].Device.Mechanisms() != "throttle+io-latency" || !st[0].Capping {
			t.Fatalf("device status %+v", st)
		}
		for _, id := range []string{"hi", "lo", "own"} {
			if ap := a.Applied(id); len(ap) != 1 || ap[0].Err != nil {
				t.Fatalf("Applied(%s) = %+v", id, ap)
			}
		}
	}
	apply(1, 1)
	if got := file(hi); got != "target=20000" {
		t.Fatalf("level 1: io.latency reads %q, want target=20000", got)
	}
	if got := file(own); got != "target=20000" {
		t.Fatalf("level 1 over a target of its own: io.latency reads %q, want target=20000", got)
	}
	if got := file(lo); got != "" {
		t.Fatalf("level 4: io.latency reads %q, want no entry", got)
	}
	apply(2, 1)
	if got := file(hi); got != "" {
		t.Fatalf("demoted to level 2: io.latency reads %q, want no entry", got)
	}
	origs, _ := a.Originals()
	var seen []string
	for _, o := range origs {
		if o.Knob == m.Knob {
			seen = append(seen, o.Cgroup+"="+o.Value)
		}
	}
	if want := hi + "= " + lo + "= " + own + "=target=50000"; strings.Join(seen, " ") != want {
		t.Fatalf("io.latency originals %q, want %q", strings.Join(seen, " "), want)
	}
	if err := a.RestoreAll(); err != nil {
		t.Fatal(err)
	}
	if got, gotOwn := file(hi), file(own); got != "" || gotOwn != "target=50000" {
		t.Fatalf("after RestoreAll: hi %q, own %q; want none and target=50000", got, gotOwn)
	}
}
