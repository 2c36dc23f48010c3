package view

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/view/viewtest"
)

// golden compares got with testdata/<name>; go test ./internal/view
// -update rewrites every golden file.
func golden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), got)
}

// statusText is status of s at now, the workloads filtered by level ("":
// all) and name, in the order by, as `ddiskqos status` prints them.
func statusText(s *snapshot.Snapshot, now time.Time, by, lvl, name string) string {
	var ws []*snapshot.Workload
	for _, w := range s.Workloads {
		l := w.Level
		if w.Exempt {
			l = 0
		}
		if (lvl == "" || lvl == string(rune('0'+l))) && strings.Contains(w.Name, name) {
			ws = append(ws, w)
		}
	}
	var b strings.Builder
	Status(&b, s, Order(ws, by), "ADDR", FilterText(lvl, name), now)
	return b.String()
}

func TestStatusGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		golden          string
		snap            func(*snapshot.Snapshot)
		age             time.Duration
		by, level, name string
	}{
		{golden: "table.golden", age: 1234 * time.Millisecond},
		{golden: "sort-level.golden", age: time.Second, by: "level"},
		{golden: "sort-rate.golden", age: time.Second, by: "rate"},
		{golden: "level-4.golden", age: time.Second, level: "4"},
		{golden: "name-filter-empty.golden", age: time.Second, name: "nomatch", level: "1"},
		{golden: "degraded.golden", age: time.Second, snap: func(s *snapshot.Snapshot) {
			s.StateError = "rename /run/ddiskqos/state.json.tmp: read-only file system"
			s.SourceError = "degraded: the docker engine is unreachable since 2025-03-01T11:59:00Z (1m0s ago, 12 attempts): dial unix /var/run/docker.sock: connect: no such file or directory; containers are not discovered or released until it is back"
		}},
		{golden: "stale-dry-run.golden", age: 95 * time.Second, snap: func(s *snapshot.Snapshot) {
			s.DryRun = true
			s.Errors = nil
			s.HostPressure = nil
			s.Devices = nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.golden, func(t *testing.T) {
			t.Parallel()
			snap := viewtest.Fixture()
			if tt.snap != nil {
				tt.snap(snap)
			}
			by := tt.by
			if by == "" {
				by = "name"
			}
			golden(t, "status/"+tt.golden, statusText(snap, viewtest.T0.Add(tt.age), by, tt.level, tt.name))
		})
	}
}

// TestStatusColumnsAligned checks every row of the workloads table starts
// each column at the header's offset.
func TestStatusColumnsAligned(t *testing.T) {
	t.Parallel()
	out := statusText(viewtest.Fixture(), viewtest.T0, "name", "", "")
	lines := strings.Split(out, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(l, "NAME ") {
			start = i
		}
	}
	if start < 0 {
		t.Fatalf("no table header:\n%s", out)
	}
	header := lines[start]
	col := strings.Index(header, "LEVEL")
	for _, row := range lines[start+1 : start+6] {
		if r := []rune(row); len(r) <= col || r[col-1] != ' ' || r[col] == ' ' {
			t.Errorf("LEVEL column not at offset %d in %q", col, row)
		}
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	for n, want := range map[uint64]string{
		0: "0", 1: "1B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 8 << 20: "8MiB",
		1536 << 10: "1.5MiB", 120 << 20: "120MiB", 3 << 30: "3GiB", 1 << 60: "1EiB", ^uint64(0): "16EiB",
	} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestCellEscapesControl(t *testing.T) {
	t.Parallel()
	for _, h := range viewtest.Hostile {
		if got := Cell(h.In); got != h.Want {
			t.Errorf("Cell(%q) = %q, want %q", h.In, got, h.Want)
		}
	}
	// Cut to 12 characters, not bytes, then escaped.
	if got := ShortID("é\x1b" + strings.Repeat("a", 20)); got != `é\x1baaaaaaaaaa` {
		t.Errorf("ShortID = %q", got)
	}
}

// TestStatusEscapesEveryColumn renders a snapshot whose every string
// field is hostile (bytes that are not UTF-8 included): the output
// carries none of it raw, and each shows escaped.
func TestStatusEscapesEveryColumn(t *testing.T) {
	t.Parallel()
	snap, wants := viewtest.HostileFixture()
	for _, by := range Sorts {
		var b strings.Builder
		Status(&b, snap, Order(snap.Workloads, by), "test", "", viewtest.T0)
		out := b.String()
		viewtest.AssertTerminalSafe(t, "status --sort "+by, out)
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("status --sort %s lacks %q:\n%s", by, want, out)
			}
		}
	}
}

// TestStatusCapped is what a new user met (issue 19): the status line of a
// container capped on its own disk shows that cap, not the weight of a
// disk it never touched; one that did no I/O says so.
func TestStatusCapped(t *testing.T) {
	t.Parallel()
	out := statusText(viewtest.Capped(), viewtest.T0.Add(time.Second), "name", "", "")
	golden(t, "status/capped.golden", out)
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "app "):
			if !strings.Contains(l, "vda cap 64MiB/s") || strings.Contains(l, "weight 100") {
				t.Errorf("app's line %q: want its cap on vda, not the weight of nvme0n1", l)
			}
		case strings.HasPrefix(l, "idle "):
			if !strings.Contains(l, "no I/O yet") {
				t.Errorf("idle's line %q: want no I/O yet", l)
			}
		}
	}
}
