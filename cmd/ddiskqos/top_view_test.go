package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rivo/uniseg"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// topAfter is snap one tick later, with edit applied to a deep enough copy
// (the workloads are new values, the published ones stay untouched).
func topAfter(snap *snapshot.Snapshot, edit func(s *snapshot.Snapshot)) *snapshot.Snapshot {
	next := *snap
	next.Tick++
	next.At = snap.At.Add(snap.Interval)
	next.Workloads = make([]*snapshot.Workload, len(snap.Workloads))
	for i, w := range snap.Workloads {
		c := *w
		next.Workloads[i] = &c
	}
	if edit != nil {
		edit(&next)
	}
	return &next
}

func topFind(s *snapshot.Snapshot, name string) *snapshot.Workload {
	for _, w := range s.Workloads {
		if w.Name == name {
			return w
		}
	}
	panic("no workload " + name)
}

func newTopModelT(snap *snapshot.Snapshot) *topModel {
	m := newTopModel("ADDR", "rate")
	m.loc = time.UTC
	m.observe(snap)
	return m
}

func topText(lines []topLine) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

func TestTopChanges(t *testing.T) {
	t.Parallel()
	s1 := statusFixture()
	m := newTopModelT(s1)
	if len(m.changes) != 0 {
		t.Fatalf("the first snapshot is the baseline, got changes %+v", m.changes)
	}
	s2 := topAfter(s1, func(s *snapshot.Snapshot) {
		db := topFind(s, "db")
		db.Level, db.LevelSince = 3, s1.At.Add(400*time.Millisecond) // demoted, the daemon's time kept
		web := topFind(s, "web-1")
		web.Level = 1 // promoted
		ssh := topFind(s, "ssh")
		ssh.Exempt, ssh.Level = false, 1 // managed again
		etl := topFind(s, "etl")
		etl.Exempt, etl.Level = true, 0 // exempted
		s.Workloads = slices.DeleteFunc(s.Workloads, func(w *snapshot.Workload) bool { return w.Name == "backup" })
		s.Workloads = append(s.Workloads, &snapshot.Workload{ID: "new1", Name: "fresh", Level: 1, ReadBytes: 4096})
	})
	m.observe(s2)
	m.observe(s2) // the same tick again: nothing new
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
	out := topText(m.render(120, 40, s2.At))
	if !strings.Contains(out, "LEVEL CHANGES (6 seen since 12:00:00)") ||
		!strings.Contains(out, "12:00:00.4  L1     → L3      demoted        db  after 0 in all") {
		t.Errorf("changes pane:\n%s", out)
	}
	s := s2
	for range topMaxChanges {
		s = topAfter(s, func(s *snapshot.Snapshot) {
			db := topFind(s, "db")
			db.Level = 1 + db.Level%4
		})
		m.observe(s)
	}
	if len(m.changes) != topMaxChanges || m.changes[0].At != s.At {
		t.Errorf("after many changes: %d kept, newest at %s; want %d, newest at %s", len(m.changes), m.changes[0].At, topMaxChanges, s.At)
	}
}

func TestTopSortKeys(t *testing.T) {
	t.Parallel()
	m := newTopModelT(statusFixture())
	order := func() []string {
		var names []string
		for _, l := range m.render(120, 40, statusT0) {
			if f := strings.Fields(l.Text); len(f) > 1 && l.Style == topPlain {
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
		if tt.key != 0 && m.key(tt.key) {
			t.Errorf("key %q quits", tt.key)
		}
		if got := order(); !slices.Equal(got, tt.want) {
			t.Errorf("after %q: rows %q, want %q", tt.key, got, tt.want)
		}
	}
	if !strings.Contains(m.render(120, 40, statusT0)[0].Text, "sort: rate") {
		t.Error("title does not name the order")
	}
	if !m.key('q') || !m.key('Q') {
		t.Error("q does not quit")
	}
}

// The columns follow the width: all at 140, the least needed dropped
// first as it shrinks; no line is ever wider than the screen; the title
// bar spans it.
func TestTopWidth(t *testing.T) {
	t.Parallel()
	m := newTopModelT(statusFixture())
	tests := []struct {
		width      int
		want, gone []string
	}{
		{140, []string{"NAME", "LEVEL", "READ/s", "WRITE/s", "WEIGHT/CAP", "IN-LEVEL", "PSI", "ID", "MECHANISM"}, nil},
		{100, []string{"ID", "MECHANISM"}, nil},
		{90, []string{"NAME", "WEIGHT/CAP", "IN-LEVEL", "PSI", "ID"}, []string{"MECHANISM"}},
		{80, []string{"NAME", "WEIGHT/CAP", "IN-LEVEL", "PSI"}, []string{"MECHANISM", "ID"}},
		{60, []string{"NAME", "LEVEL", "READ/s", "WRITE/s", "WEIGHT/CAP"}, []string{"IN-LEVEL", "PSI", "ID", "MECHANISM"}},
		{40, []string{"NAME", "LEVEL", "READ/s", "WRITE/s"}, []string{"WEIGHT/CAP"}},
		{30, []string{"NAME", "LEVEL"}, []string{"WEIGHT/CAP"}}, // cut at the edge
	}
	for _, tt := range tests {
		lines := m.render(tt.width, 40, statusT0)
		var head string
		for i, l := range lines {
			if w := uniseg.StringWidth(l.Text); w > tt.width {
				t.Errorf("width %d: line %d is %d wide: %q", tt.width, i, w, l.Text)
			}
			if l.Style == topHeading && strings.HasPrefix(l.Text, "NAME") {
				head = l.Text
			}
		}
		if w := uniseg.StringWidth(lines[0].Text); w != tt.width {
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
	s1 := statusFixture()
	for i := range 50 {
		s1.Workloads = append(s1.Workloads, &snapshot.Workload{ID: fmt.Sprintf("id%02d", i), Name: fmt.Sprintf("many-%02d", i), Level: 1, ReadBps: float64(i)})
	}
	m := newTopModelT(s1)
	m.observe(topAfter(s1, func(s *snapshot.Snapshot) { topFind(s, "db").Level = 2 }))
	for _, h := range []int{1, 5, 12, 30, 80} {
		lines := m.render(100, h, statusT0)
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
	if out := topText(m.render(100, 80, statusT0)); strings.Contains(out, "more (a taller") || !strings.Contains(out, "many-00") {
		t.Errorf("all 55 workloads fit in 80 lines:\n%s", out)
	}
	if m.render(0, 10, statusT0) != nil || m.render(10, 0, statusT0) != nil {
		t.Error("an empty screen has lines")
	}
}

// Degraded and unreachable are said plainly at the top; the names of the
// workloads cannot reach the terminal's escapes.
func TestTopHealthAndEscapes(t *testing.T) {
	t.Parallel()
	s1 := statusFixture()
	m := newTopModelT(s1)
	if out := topText(m.render(120, 30, s1.At)); !strings.Contains(out, "health ok;") || strings.Contains(out, "DEGRADED") {
		t.Errorf("healthy daemon:\n%s", out)
	}
	s2 := topAfter(s1, func(s *snapshot.Snapshot) {
		s.SourceError = "degraded: the docker engine is unreachable since 2025-03-01T12:00:00Z"
		s.Workloads = append(s.Workloads, &snapshot.Workload{ID: "e", Name: "evil\x1b]0;pwned\x07\x1b[2J", Level: 1})
	})
	m.observe(s2)
	m.fetchFailed(errors.New("connection refused"), s2.At.Add(time.Second))
	lines := m.render(200, 30, s2.At.Add(2*time.Second))
	if lines[1].Style != topAlert || !strings.HasPrefix(lines[1].Text, "UNREACHABLE for 1s: daemon not reachable at ADDR: connection refused") {
		t.Errorf("line 1 %+v, want the failed fetch", lines[1])
	}
	if lines[2].Style != topAlert || !strings.HasPrefix(lines[2].Text, "DEGRADED: source docker: the docker engine is unreachable") {
		t.Errorf("line 2 %+v, want the source down", lines[2])
	}
	out := topText(lines)
	if !strings.Contains(out, "health degraded;") || strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, 0x07) ||
		!strings.Contains(out, `evil\x1b]0;pwned\x07\x1b[2J`) {
		t.Errorf("degraded, with an escaping name:\n%s", out)
	}
	// The next answer clears the failure.
	m.observe(topAfter(s2, nil))
	if out := topText(m.render(120, 30, s2.At)); strings.Contains(out, "UNREACHABLE") {
		t.Errorf("an answer after a failure still shows it:\n%s", out)
	}
}

// TestTopGolden is the whole screen at 120×30 (the tmux test's size).
// go test ./cmd/ddiskqos/ -run TestTopGolden -update rewrites
// testdata/status/top-120x30.golden.
func TestTopGolden(t *testing.T) {
	t.Parallel()
	s1 := statusFixture()
	s1.Devices[0].CapacityBps, s1.Devices[0].CapacityIOPS = 200<<20, 1500 // sda, throttled
	m := newTopModelT(s1)
	m.observe(topAfter(s1, func(s *snapshot.Snapshot) {
		w := topFind(s, "web-1")
		w.Level, w.Weight, w.ReadBytes = 4, 10, 300<<20
	}))
	got := topText(m.render(120, 30, s1.At.Add(1500*time.Millisecond)))
	statusGolden(t, "top-120x30.golden", got)
}

// Usage errors exit 2 naming the flag; an unreachable daemon exits 1 on
// the plain terminal, before the screen is taken.
func TestTopErrors(t *testing.T) {
	t.Parallel()
	dead := testkit.FreeAddr(t) // listened on, then closed
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"--sort", "size"}, 2, `--sort "size": want one of name, level, rate`},
		{[]string{"--refresh", "1ms"}, 2, "--refresh 1ms: want at least 50ms"},
		{[]string{"--timeout", "0s"}, 2, "--timeout 0s"},
		{[]string{"--addr", "ftp://x"}, 2, `--addr "ftp://x"`},
		{[]string{"--bogus"}, 2, "-bogus"},
		{[]string{"web"}, 2, `unexpected argument "web"`},
		{[]string{"--addr", dead}, 1, "daemon not reachable at " + dead},
	}
	for _, tt := range tests {
		var out, errOut strings.Builder
		if code := runTop(tt.args, &out, &errOut); code != tt.wantCode || !strings.Contains(errOut.String(), tt.wantErr) || out.Len() != 0 {
			t.Errorf("top %q: exit %d, stdout %q, stderr %q; want exit %d naming %q", tt.args, code, out.String(), errOut.String(), tt.wantCode, tt.wantErr)
		}
	}
}
