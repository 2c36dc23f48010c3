package view

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/view/viewtest"
)

func newTopT(snap *snapshot.Snapshot) *Top {
	m := NewTop("ADDR", "rate")
	m.loc = time.UTC
	m.Observe(snap)
	return m
}

func topText(lines []Line) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestTopChanges(t *testing.T) {
	t.Parallel()
	s1 := viewtest.Fixture()
	m := newTopT(s1)
	if len(m.changes) != 0 {
		t.Fatalf("the first snapshot is the baseline, got changes %+v", m.changes)
	}
	s2 := viewtest.After(s1, func(s *snapshot.Snapshot) {
		db := viewtest.Find(s, "db")
		db.Level, db.LevelSince = 3, s1.At.Add(400*time.Millisecond) // demoted, the daemon's time kept
		web := viewtest.Find(s, "web-1")
		web.Level = 1 // promoted
		ssh := viewtest.Find(s, "ssh")
		ssh.Exempt, ssh.Level = false, 1 // managed again
		etl := viewtest.Find(s, "etl")
		etl.Exempt, etl.Level = true, 0 // exempted
		s.Workloads = slices.DeleteFunc(s.Workloads, func(w *snapshot.Workload) bool { return w.Name == "backup" })
		s.Workloads = append(s.Workloads, &snapshot.Workload{ID: "new1", Name: "fresh", Level: 1, ReadBytes: 4096})
	})
	m.Observe(s2)
	m.Observe(s2) // the same tick again: nothing new
	got := make([]string, len(m.changes))
	for i, c := range m.changes {
		got[i] = fmt.Sprintf("%s %s %s>%s %s", c.At.Sub(s1.At), c.Name, topLevelName(c.From), topLevelName(c.To), topChangeWhat(c))
	}
	want := []string{
		"1s backup L4>- gone",
		"1s etl L3>exempt exempted",
		"1s fresh ->L1 new",
		"1s ssh exempt>L1 managed again",
		"1s web-1 L2>L1 promoted",
		"400ms db L1>L3 demoted",
	}
	if !slices.Equal(got, want) {
		t.Errorf("changes, newest first:\n got %q\nwant %q", got, want)
	}
	if s1.Workloads[1].Level != 1 {
		t.Fatal("test bug: the first snapshot was modified")
	}
	// The pane shows them, newest first, and keeps at most topMaxChanges.
	out := topText(m.Render(120, 40, s2.At))
	if !strings.Contains(out, "LEVEL CHANGES (6 seen since 12:00:00)") ||
		!strings.Contains(out, "12:00:00.4  L1     → L3      demoted        db  after 0 in all") {
		t.Errorf("changes pane:\n%s", out)
	}
	s := s2
	for range topMaxChanges {
		s = viewtest.After(s, func(s *snapshot.Snapshot) {
			db := viewtest.Find(s, "db")
			db.Level = 1 + db.Level%4
		})
		m.Observe(s)
	}
	if len(m.changes) != topMaxChanges || m.changes[0].At != s.At {
		t.Errorf("after many changes: %d kept, newest at %s; want %d, newest at %s", len(m.changes), m.changes[0].At, topMaxChanges, s.At)
	}
}

func TestTopSortKeys(t *testing.T) {
	t.Parallel()
	m := newTopT(viewtest.Fixture())
	order := func() []string {
		var names []string
		for _, l := range m.Render(120, 40, viewtest.T0) {
			if f := strings.Fields(l.Text); len(f) > 1 && l.Style == Plain {
				for _, w := range m.snap.Workloads {
					if f[0] == w.Name {
						names = append(names, f[0])
					}
				}
			}
		}
		return names
	}
	tests := []struct {
		key  rune
		want []string
	}{
		{0, []string{"backup", "etl", "db", "web-1", "ssh"}}, // --sort rate
		{'l', []string{"db", "web-1", "etl", "backup", "ssh"}},
		{'n', []string{"backup", "db", "etl", "ssh", "web-1"}},
		{'x', []string{"backup", "db", "etl", "ssh", "web-1"}}, // not a key: unchanged
		{'r', []string{"backup", "etl", "db", "web-1", "ssh"}},
	}
	for _, tt := range tests {
		if tt.key != 0 && m.Key(tt.key) {
			t.Errorf("key %q quits", tt.key)
		}
		if got := order(); !slices.Equal(got, tt.want) {
			t.Errorf("after %q: rows %q, want %q", tt.key, got, tt.want)
		}
	}
	if !strings.Contains(m.Render(120, 40, viewtest.T0)[0].Text, "sort: rate") {
		t.Error("title does not name the order")
	}
	if !m.Key('q') || !m.Key('Q') {
		t.Error("q does not quit")
	}
}

// The columns follow the width: all at 140, the least needed dropped
// first as it shrinks, what ddiskqos does (ACTION) kept at 80; no line is
// ever wider than the screen; the title bar spans it.
func TestTopWidth(t *testing.T) {
	t.Parallel()
	m := newTopT(viewtest.Fixture())
	tests := []struct {
		width      int
		want, gone []string
	}{
		{140, []string{"NAME", "LEVEL", "READ/s", "WRITE/s", "ACTION", "IN-LEVEL", "P99", "IN-FLIGHT", "PSI", "ID", "MECHANISM"}, nil},
		{120, []string{"P99", "PSI", "ID"}, []string{"IN-FLIGHT", "MECHANISM"}},
		{100, []string{"ACTION", "IN-LEVEL", "P99", "PSI"}, []string{"IN-FLIGHT", "ID", "MECHANISM"}},
		{90, []string{"NAME", "ACTION", "IN-LEVEL", "P99"}, []string{"PSI", "MECHANISM", "ID"}},
		{80, []string{"NAME", "LEVEL", "READ/s", "WRITE/s", "ACTION", "P99"}, []string{"IN-LEVEL", "PSI", "ID", "MECHANISM"}},
		{60, []string{"NAME", "LEVEL", "READ/s", "WRITE/s", "P99"}, []string{"ACTION", "IN-LEVEL", "PSI", "ID", "MECHANISM"}},
		{40, []string{"NAME", "LEVEL", "READ/s", "WRITE/s"}, []string{"ACTION", "P99"}},
		{30, []string{"NAME", "LEVEL"}, []string{"ACTION"}}, // cut at the edge
	}
	for _, tt := range tests {
		lines := m.Render(tt.width, 40, viewtest.T0)
		var head string
		for i, l := range lines {
			if w := width(l.Text); w > tt.width {
				t.Errorf("width %d: line %d is %d wide: %q", tt.width, i, w, l.Text)
			}
			if l.Style == Heading && strings.HasPrefix(l.Text, "NAME") {
				head = l.Text
			}
		}
		if w := width(lines[0].Text); w != tt.width {
			t.Errorf("width %d: title bar %d wide", tt.width, w)
		}
		cols := strings.Fields(head)
		for _, c := range tt.want {
			if !slices.Contains(cols, c) {
				t.Errorf("width %d: no column %s in %q", tt.width, c, head)
			}
		}
		for _, c := range tt.gone {
			if slices.Contains(cols, c) {
				t.Errorf("width %d: column %s should be gone: %q", tt.width, c, head)
			}
		}
	}
}

// The screen is filled exactly: the hints on the last line, as many
// workloads as fit with the rest counted, the changes pane kept.
func TestTopHeight(t *testing.T) {
	t.Parallel()
	s1 := viewtest.Fixture()
	for i := range 50 {
		s1.Workloads = append(s1.Workloads, &snapshot.Workload{ID: fmt.Sprintf("id%02d", i), Name: fmt.Sprintf("many-%02d", i), Level: 1, ReadBps: float64(i)})
	}
	m := newTopT(s1)
	m.Observe(viewtest.After(s1, func(s *snapshot.Snapshot) { viewtest.Find(s, "db").Level = 2 }))
	for _, h := range []int{1, 5, 12, 30, 80} {
		lines := m.Render(100, h, viewtest.T0)
		if len(lines) != h {
			t.Errorf("height %d: %d lines", h, len(lines))
			continue
		}
		if last := lines[h-1].Text; !strings.HasPrefix(last, "q quit") {
			t.Errorf("height %d: last line %q, want the key hints", h, last)
		}
		out := topText(lines)
		if h >= 30 {
			if !strings.Contains(out, "LEVEL CHANGES (1 seen") || !strings.Contains(out, "demoted        db") {
				t.Errorf("height %d: changes pane missing:\n%s", h, out)
			}
			if !strings.Contains(out, "more (a taller window shows them)") && h < 80 {
				t.Errorf("height %d: rows cut without saying so:\n%s", h, out)
			}
		}
	}
	if out := topText(m.Render(100, 80, viewtest.T0)); strings.Contains(out, "more (a taller") || !strings.Contains(out, "many-00") {
		t.Errorf("all 55 workloads fit in 80 lines:\n%s", out)
	}
	if m.Render(0, 10, viewtest.T0) != nil || m.Render(10, 0, viewtest.T0) != nil {
		t.Error("an empty screen has lines")
	}
}

// Degraded and unreachable are said plainly at the top; the names of the
// workloads cannot reach the terminal's escapes.
func TestTopHealthAndEscapes(t *testing.T) {
	t.Parallel()
	s1 := viewtest.Fixture()
	m := newTopT(s1)
	if out := topText(m.Render(120, 30, s1.At)); !strings.Contains(out, "health ok;") || strings.Contains(out, "DEGRADED") {
		t.Errorf("healthy daemon:\n%s", out)
	}
	s2 := viewtest.After(s1, func(s *snapshot.Snapshot) {
		s.SourceError = "degraded: the docker engine is unreachable since 2025-03-01T12:00:00Z"
		s.Workloads = append(s.Workloads, &snapshot.Workload{ID: "e", Name: "evil\x1b]0;pwned\x07\x1b[2J", Level: 1})
	})
	m.Observe(s2)
	m.FetchFailed(errors.New("connection refused"), s2.At.Add(time.Second))
	lines := m.Render(200, 30, s2.At.Add(2*time.Second))
	if lines[1].Style != Alert || !strings.HasPrefix(lines[1].Text, "UNREACHABLE for 1s: daemon not reachable at ADDR: connection refused") {
		t.Errorf("line 1 %+v, want the failed fetch", lines[1])
	}
	if lines[2].Style != Alert || !strings.HasPrefix(lines[2].Text, "DEGRADED: source docker: the docker engine is unreachable") {
		t.Errorf("line 2 %+v, want the source down", lines[2])
	}
	out := topText(lines)
	if !strings.Contains(out, "health degraded;") || strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x07) ||
		!strings.Contains(out, `evil\x1b]0;pwned\x07\x1b[2J`) {
		t.Errorf("degraded, with an escaping name:\n%s", out)
	}
	// The next answer clears the failure.
	m.Observe(viewtest.After(s2, nil))
	if out := topText(m.Render(120, 30, s2.At)); strings.Contains(out, "UNREACHABLE") {
		t.Errorf("an answer after a failure still shows it:\n%s", out)
	}
}

// TestTopGolden is the whole screen at 120×30 (the tmux test's size).
func TestTopGolden(t *testing.T) {
	t.Parallel()
	s1 := viewtest.Fixture()
	s1.Devices[0].CapacityBps, s1.Devices[0].CapacityIOPS = 200<<20, 1500 // sda, throttled
	m := newTopT(s1)
	m.Observe(viewtest.After(s1, func(s *snapshot.Snapshot) {
		w := viewtest.Find(s, "web-1")
		w.Level, w.Weight, w.ReadBytes = 4, 10, 300<<20
	}))
	got := topText(m.Render(120, 30, s1.At.Add(1500*time.Millisecond)))
	golden(t, "top/120x30.golden", got)
}

// TestTopGolden80 is the whole screen at 80×30, the classic terminal: the
// least needed columns of both tables gone, what ddiskqos does to each
// workload (ACTION) and the caps on each device (CAPS) still there.
func TestTopGolden80(t *testing.T) {
	t.Parallel()
	s1 := viewtest.Fixture()
	s1.Devices[0].CapacityBps, s1.Devices[0].CapacityIOPS = 200<<20, 1500 // sda, throttled
	got := topText(newTopT(s1).Render(80, 30, s1.At.Add(time.Second)))
	golden(t, "top/80x30.golden", got)
	for _, want := range []string{"CAPS", "2 capped, min 10MiB/s", "ACTION", "loop3 weight 10, sda cap 10MiB/s"} {
		if !strings.Contains(got, want) {
			t.Errorf("80 columns: no %q:\n%s", want, got)
		}
	}
}

// TestTopCapped is what a new user met (issue 19): at 80 columns the
// capped container shows its cap on its own disk, not the weight on a
// disk it never touched, and the disk shows the cap in force.
func TestTopCapped(t *testing.T) {
	t.Parallel()
	s := viewtest.Capped()
	got := topText(newTopT(s).Render(80, 24, s.At.Add(time.Second)))
	golden(t, "top/capped-80x24.golden", got)
	app := rowOf(got, "app ")
	if !strings.Contains(app, "vda cap 64MiB/s") || strings.Contains(app, "weight 100") {
		t.Errorf("app's row %q: want its cap on vda, no weight of an untouched disk", app)
	}
	if idle := rowOf(got, "idle "); !strings.Contains(idle, "no I/O yet") {
		t.Errorf("idle's row %q: want no I/O yet", idle)
	}
	if vda := rowOf(got, "vda "); !strings.Contains(vda, "1 capped, min 64MiB/s") {
		t.Errorf("vda's row %q: want its cap", vda)
	}
}

// rowOf is the first line of out that starts with prefix.
func rowOf(out, prefix string) string {
	for l := range strings.SplitSeq(out, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestTopControllerShare: a throttled device steered by the latency
// controller shows, beside its caps, the capped workloads' share and the
// p99 target the controller holds.
func TestTopControllerShare(t *testing.T) {
	t.Parallel()
	s := viewtest.Fixture()
	s.Devices[0].CapacityBps = 200 << 20 // sda, throttled
	s.Devices[0].CappedShare, s.Devices[0].LatencyTarget, s.Devices[0].ProtectedP99 = 0.084, 0.0036, 0.0011
	got := topText(newTopT(s).Render(160, 30, s.At.Add(time.Second)))
	if row := rowOf(got, "sda "); !strings.Contains(row, "2 capped, min 10MiB/s, share 8 %, p99 target 3.6ms") {
		t.Errorf("sda's row %q: want the share and the target beside the caps\n%s", row, got)
	}
}
