package daemon

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// countObserver counts the errors the loop reports, by cause.
type countObserver struct {
	nopObserver
	mu   sync.Mutex
	errs map[snapshot.ErrorCause]int
}

func (o *countObserver) Error(cause snapshot.ErrorCause) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.errs[cause]++
}

// TestFailingKnobReportedOnce: a knob that cannot be written (here its file
// is a directory, in a fake v2 tree) gives one WARN and one counted error
// when it begins to fail, none on the ticks after, and one WARN when it
// works again; a new failure is reported anew.
func TestFailingKnobReportedOnce(t *testing.T) {
	t.Parallel()
	mount := t.TempDir()
	dir := filepath.Join(mount, "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "io.stat"), []byte("7:0 rbytes=0 wbytes=0 rios=0 wios=0 dbytes=0 dios=0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	knob := filepath.Join(dir, "io.bfq.weight")
	breakKnob := func() {
		t.Helper()
		if err := os.RemoveAll(knob); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(knob, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fixKnob := func() {
		t.Helper()
		if err := os.RemoveAll(knob); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(knob, []byte("default 100\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	breakKnob()

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	obs := &countObserver{errs: map[snapshot.ErrorCause]int{}}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	h := cgroupfs.Hierarchy{Version: 2, Mount: mount}
	d, err := New(Options{
		Hierarchy: h, Source: idleSource{}, Policy: policy.DefaultConfig(),
		Actuator: actuate.Config{Devices: []actuate.Device{{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: host.MechBFQWeight}}},
		Interval: time.Second, Now: func() time.Time { return now }, NoFile: 1 << 20, Logger: log, Observer: obs,
	})
	if err != nil {
		t.Fatal(err)
	}
	d.started, d.noFile = now, 1<<20
	d.handle(source.Event{Kind: source.Added, Workload: source.Workload{ID: "c", Name: "c", Cgroup: "/c"}})

	warns := func() []string {
		var out []string
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, "level=WARN") {
				out = append(out, line)
			}
		}
		return out
	}
	steps := func(n int) {
		for range n {
			d.step()
			now = now.Add(time.Second)
		}
	}
	appliedErr := func() string {
		for _, w := range d.Snapshot().Workloads {
			for _, a := range w.Applied {
				return a.Error
			}
		}
		return "no applied entry"
	}

	steps(6)
	w := warns()
	if len(w) != 1 || !strings.Contains(w[0], "io.bfq.weight") {
		t.Fatalf("6 ticks with a broken knob: %d WARN lines, want 1 naming the knob:\n%s", len(w), logs.String())
	}
	t.Logf("6 failing ticks: %s", w[0])
	if obs.errs[snapshot.CauseActuate] != 1 {
		t.Errorf("actuate errors counted %d, want 1", obs.errs[snapshot.CauseActuate])
	}
	if e := appliedErr(); e == "" {
		t.Error("the snapshot does not carry the knob's error while it fails")
	}

	fixKnob()
	steps(4)
	w = warns()
	if len(w) != 2 || !strings.Contains(w[1], "knob works again") || !strings.Contains(w[1], "cgroup=/c") {
		t.Fatalf("after the repair: WARN lines %d, want 2 (the second: works again):\n%s", len(w), logs.String())
	}
	t.Logf("repaired: %s", w[1])
	if got, _ := os.ReadFile(knob); !strings.Contains(string(got), "7:0 ") {
		t.Errorf("repaired knob holds %q, want a weight for 7:0", got)
	}
	if e := appliedErr(); e != "" {
		t.Errorf("after the repair the snapshot still shows %q", e)
	}

	// A second failure is news again. Reassert is off: a new level-1
	// weight in the policy makes the loop write the knob.
	breakKnob()
	pc := policy.DefaultConfig()
	pc.Weights[0] = 900
	if err := d.Reconfigure(pc); err != nil {
		t.Fatal(err)
	}
	steps(5)
	if w = warns(); len(w) != 3 {
		t.Fatalf("second failure: %d WARN lines, want 3:\n%s", len(w), logs.String())
	}
	if obs.errs[snapshot.CauseActuate] != 2 {
		t.Errorf("actuate errors counted %d, want 2", obs.errs[snapshot.CauseActuate])
	}
}
