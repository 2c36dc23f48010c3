package contention

import (
	"strings"
	"testing"
)

// TestBestPeer: the largest share among the peers keeping both victims
// within the limit; with none within it, the least slowed worse victim;
// ddiskqos, no QoS and idle are never peers.
func TestBestPeer(t *testing.T) {
	t.Parallel()
	row := func(c Config, web, light, share float64) HostRow {
		return HostRow{Config: c, WebP99: Spread{Median: web, N: 1}, LightP99: Spread{Median: light, N: 1}, During: Spread{Median: share, N: 1}}
	}
	s := HostSummary{Rows: []HostRow{
		row(Original, 100, 100, 1), row(DDiskQoS, 1, 1, 0.9), row(DDiskQoSCapping, 1, 1, 0.8),
		row("static-2", 1.5, 1.2, 0.02), row("static-10", 2.9, 2, 0.10), row("rearm-10", 2, 3.5, 0.11), row("static-25", 9, 9, 0.25),
	}}
	if p, within, ok := BestPeer(s, 3); !ok || !within || p.Config != "static-10" {
		t.Errorf("best peer %s (within %v, ok %v), want static-10", p.Config, within, ok)
	}
	s.Rows = []HostRow{row(Original, 100, 100, 1), row("static-5", 4, 6, 0.05), row("rearm-5", 5, 4, 0.05), row("static-25", 9, 9, 0.25)}
	if p, within, ok := BestPeer(s, 3); !ok || within || p.Config != "rearm-5" {
		t.Errorf("none within: best peer %s (within %v, ok %v), want rearm-5 (worse victim 5x)", p.Config, within, ok)
	}
	s.Rows = []HostRow{row(Original, 1, 1, 1), row(DDiskQoS, 1, 1, 1)}
	if p, _, ok := BestPeer(s, 3); ok {
		t.Errorf("no peer: got %s", p.Config)
	}
}

// TestWriteMatrixMarkdown: the matrix is the host scenario's one report:
// a row per entry linking its section's anchor (never a per-cell .md),
// then each entry's full report under "## <base>", its own headings one
// level down, naming its JSON and no plot. Mutations checked: the rows
// linking <base>.md again, the sections dropped, a plot named in them.
func TestWriteMatrixMarkdown(t *testing.T) {
	t.Parallel()
	cells := []HostCell{
		hostCellOf(Idle, 500, 400, 10, 0, 0), hostCellOf(Original, 64000, 70000, 90, 1000, 1000),
		hostCellOf(DDiskQoS, 1000, 800, 20, 150, 950), hostCellOf("static-10", 3200, 400, 13, 100, 100),
	}
	var es []MatrixEntry
	for _, class := range []string{"vda-loop", "Tmpfs-Loop"} {
		r := hostResult("0.2", cells...)
		r.Plan.Configs = []Config{Idle, Original, DDiskQoS, "static-10"}
		r.Plan.Device = class
		es = append(es, MatrixEntry{File: "contention-host-" + class + ".json", R: r, S: SummarizeHost(r)})
	}
	var b strings.Builder
	WriteMatrixMarkdown(&b, es)
	md := b.String()
	table, sections, ok := strings.Cut(md, "\n## ")
	if !ok {
		t.Fatalf("no section:\n%s", md)
	}
	for _, want := range []string{
		"| vda-loop, scheduler none, greedy (QD32, unpaced) | [contention-host-vda-loop](#contention-host-vda-loop), `abc123 (modified tree)`, 2026-11-25 21:00 |",
		"| Tmpfs-Loop, scheduler none, greedy (QD32, unpaced) | [contention-host-Tmpfs-Loop](#contention-host-tmpfs-loop), ",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if n := strings.Count(table, "\n| ") - 2; n != len(es) {
		t.Errorf("%d rows for %d entries:\n%s", n, len(es), table)
	}
	for _, e := range es {
		base := e.Base()
		head := "\n## " + base + "\n\nThe host scenario's report of " + matrixClass(e) + ", from [" + e.File + "](" + e.File + ").\n\nRegenerate with `"
		if strings.Count(md, head) != 1 {
			t.Errorf("no section %q:\n%s", head, md)
		}
	}
	if n := strings.Count(md, "\n## "); n != len(es) {
		t.Errorf("%d sections for %d entries", n, len(es))
	}
	for _, h := range []string{"### The victims' first second", "### ddiskqos against the static-cap frontier", "### The bars", "### Configurations"} {
		if strings.Count(sections, "\n"+h+"\n") != len(es) {
			t.Errorf("%q not once a section:\n%s", h, sections)
		}
	}
	for _, bad := range []string{".md)", ".svg", "![", "\n# Contention on a host"} {
		if strings.Contains(md, bad) {
			t.Errorf("matrix names %q:\n%s", bad, md)
		}
	}
	if !strings.HasSuffix(md, "cgroup.\n") {
		t.Errorf("does not end with the last report's last line: %q", md[len(md)-40:])
	}
}

func TestAnchor(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"contention-host-vda-loop-bfq": "contention-host-vda-loop-bfq",
		"contention-host-VM_x-v2":      "contention-host-vm_x-v2",
		"The bars (issue 20)":          "the-bars-issue-20",
	} {
		if got := Anchor(in); got != want {
			t.Errorf("Anchor(%q) = %q, want %q", in, got, want)
		}
	}
}
