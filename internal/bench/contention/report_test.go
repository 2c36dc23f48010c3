package contention

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/calibrate"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// cellOf builds a cell with a web p50/p99, one cold read per size and,
// with a neighbour, its throughput during and after.
func cellOf(c Config, nb Neighbour, p50, p99, cold float64, during, after float64) Cell {
	cell := Cell{Trial: 1, Config: c, Neighbour: nb, Web: workload.Latency{P50: p50, P99: p99, P999: p99 * 1.1}, WebOps: 100,
		WebResponse: workload.Latency{P50: p50, P99: p99 * 2, P999: p99 * 3},
		Cold:        [][]float64{{cold}, {cold * 5}}}
	if nb != "" {
		cell.NB = &NeighbourStats{Warm: Window{Cgroup: during, Device: during}, During: Window{Cgroup: during, Device: during},
			After1: Window{Cgroup: after, Device: after}, After2: Window{Cgroup: after, Device: after}}
	}
	return cell
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	r := &Result{Plan: Plan{Trials: 1, Neighbours: []Neighbour{SeqRead}, Configs: Configs, FsyncEvery: 32 << 20}, Cells: []Cell{
		cellOf(Idle, "", 100, 200, 10, 0, 0),
		cellOf(IdleBFQ, "", 150, 400, 20, 0, 0),
		cellOf(Original, SeqRead, 5000, 40000, 50, 1000, 1000),
		cellOf(BFQ, SeqRead, 300, 4000, 40, 300, 900),
		cellOf(Static, SeqRead, 160, 800, 21, 250, 1000),
		cellOf(ThrottleFixed, SeqRead, 900, 9000, 30, 500, 500),
		cellOf(DDiskQoS, SeqRead, 140, 500, 14, 600, 960),     // meets every bar
		cellOf(DDiskQoSBFQ, SeqRead, 300, 1000, 20, 400, 900), // 2.5× its BFQ idle p99; during 40 %, after 90 %
	}}
	s := Summarize(r)
	if len(s.Rows) != 6 {
		t.Fatalf("%d rows, want 6 (every configuration but the two idles)", len(s.Rows))
	}
	row := func(c Config) Row {
		for _, x := range s.Rows {
			if x.Config == c {
				return x
			}
		}
		t.Fatalf("no row for %s", c)
		return Row{}
	}
	for _, tc := range []struct {
		c         Config
		p99, cold float64
		during    float64
	}{
		{Original, 200, 5, 1},
		{DDiskQoS, 2.5, 1.4, 0.6},
		{DDiskQoSBFQ, 2.5, 1, 0.4}, // against idle-bfq, not idle
		{Static, 2, 1.05, 0.25},
	} {
		x := row(tc.c)
		if math.Abs(x.WebP99.Median-tc.p99) > 1e-9 || math.Abs(x.Cold[0].Median-tc.cold) > 1e-9 || math.Abs(x.NBDuring.Median-tc.during) > 1e-9 {
			t.Errorf("%s: p99 %g× cold %g× during %g; want %g× %g× %g", tc.c, x.WebP99.Median, x.Cold[0].Median, x.NBDuring.Median, tc.p99, tc.cold, tc.during)
		}
	}
	missed := map[string]bool{}
	for _, b := range s.Bars {
		if !b.Met {
			missed[string(b.Config)+": "+b.What] = true
		}
	}
	want := []string{"ddiskqos-bfq: neighbour during ÷ no QoS", "ddiskqos-bfq: neighbour 1–2 s after ÷ no QoS", "ddiskqos-bfq: web p50 ÷ idle"}
	for _, m := range want {
		if !missed[m] {
			t.Errorf("bar %q not missed; missed: %v", m, missed)
		}
	}
	if len(missed) != len(want) || s.Missed != len(want) || len(s.Bars) != 13 {
		t.Errorf("missed %v (%d of %d bars); want exactly %v", missed, s.Missed, len(s.Bars), want)
	}

	r.Build = report.Build{Revision: "abc123"}
	var md, svg strings.Builder
	WriteMarkdown(&md, r, s, "contention.svg")
	WriteSVG(&svg, r, s)
	if x := row(Original); x.WebRespP99.Median != 200 {
		t.Errorf("original response p99 ÷ idle %g, want 200", x.WebRespP99.Median)
	}
	for _, want := range []string{"| original | 50.0× | 200× |", "| ddiskqos | 1.40× | 2.50× |", "3 of 13 bars missed", "![victim p99", "Built from `abc123`, measured"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.HasPrefix(svg.String(), "<svg") || strings.Count(svg.String(), "<rect") < 1+2*6 || strings.Contains(svg.String(), "NaN") {
		t.Errorf("SVG:\n%s", svg.String())
	}
}

// TestSummarizeMissing: a cell without its reference gives no ratio, and
// its bars count as missed, never as met.
func TestSummarizeMissing(t *testing.T) {
	t.Parallel()
	r := &Result{Plan: Plan{Trials: 1, Neighbours: []Neighbour{RandRead}, Configs: []Config{Idle, IdleBFQ, Original, DDiskQoS}},
		Cells: []Cell{cellOf(DDiskQoS, RandRead, 1, 1, 1, 1, 1)}}
	s := Summarize(r)
	for _, b := range s.Bars {
		if b.Met || b.Value.N != 0 {
			t.Errorf("bar %s met without data: %+v", b.What, b)
		}
	}
	var md strings.Builder
	WriteMarkdown(&md, r, s, "")
	if strings.Contains(md.String(), "NaN") || !strings.Contains(md.String(), "| — |") {
		t.Errorf("missing values not shown as —:\n%s", md.String())
	}
}

func TestPlanSelect(t *testing.T) {
	t.Parallel()
	p, err := PlanFor(ModeQuick, 2)
	if err != nil || p.Trials != 2 {
		t.Fatalf("PlanFor(quick, 2) = %+v, %v", p, err)
	}
	if err := p.Select([]string{"bufwrite", "seqread", "bufwrite"}, []string{"ddiskqos", "static"}); err != nil {
		t.Fatal(err)
	}
	if got := joinNames(p.Neighbours); got != "bufwrite, seqread" {
		t.Errorf("neighbours %s", got)
	}
	if got := joinNames(p.Configs); got != "idle, idle-bfq, original, static, ddiskqos" {
		t.Errorf("configs %s", got)
	}
	for _, bad := range [][2][]string{{{"nope"}, nil}, {nil, {"cfq"}}} {
		q, _ := PlanFor(ModeQuick, 0)
		if err := q.Select(bad[0], bad[1]); err == nil || len(q.Neighbours) != 2 || len(q.Configs) != len(Configs) {
			t.Errorf("Select(%q) = %v, plan changed to %v %v", bad, err, q.Neighbours, q.Configs)
		}
	}
	if _, err := PlanFor("slow", 0); err == nil {
		t.Error("PlanFor(slow) accepted")
	}
}

func TestSamplerWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	s := &sampler{samples: []sample{
		{t: t0, cgroup: 0, device: 0},
		{t: t0.Add(time.Second), cgroup: 100, device: 200},
		{t: t0.Add(3 * time.Second), cgroup: 100, device: 600},
	}}
	for _, tc := range []struct {
		a, b       time.Duration
		cg, device float64
	}{
		{0, time.Second, 100, 200},
		{500 * time.Millisecond, 1500 * time.Millisecond, 50, 200}, // interpolated at both ends
		{time.Second, 3 * time.Second, 0, 200},
		{2 * time.Second, 5 * time.Second, 0, 200.0 / 3}, // clamped past the last sample
	} {
		w := s.window(t0.Add(tc.a), t0.Add(tc.b))
		if math.Abs(w.Cgroup-tc.cg) > 1e-6 || math.Abs(w.Device-tc.device) > 1e-6 {
			t.Errorf("window %v..%v = %+v; want cgroup %g device %g", tc.a, tc.b, w, tc.cg, tc.device)
		}
	}
}

// TestMarkdownV2: a v2 run's report names v2's files and knobs, says that
// a run in the test VM is relative only, and shows the iocost calibration;
// a v1 run's keeps v1's wording.
func TestMarkdownV2(t *testing.T) {
	t.Parallel()
	cells := []Cell{
		cellOf(Idle, "", 100, 200, 10, 0, 0),
		cellOf(IdleBFQ, "", 150, 400, 20, 0, 0),
		cellOf(Original, SeqRead, 5000, 40000, 50, 1000, 1000),
		cellOf(DDiskQoS, SeqRead, 140, 500, 14, 600, 960),
	}
	plan := Plan{Trials: 1, Neighbours: []Neighbour{SeqRead}, Configs: []Config{Idle, IdleBFQ, Original, ThrottleFixed, DDiskQoS}}
	v2 := &Result{Cgroup: "v2", Memory: true, TestVM: true, Plan: plan, Cells: cells, Backing: "/mnt/vda/ddiskqos-bench-paper-1/disk.img",
		IOCost: &IOCost{Model: "7:64 ctrl=user model=linear rbps=1000", QoS: "7:64 enable=1 ctrl=user rpct=95.00 rlat=900", Twin: "loop65",
			PatternTime: 3 * time.Second, Measurements: []calibrate.Measurement{{Pattern: calibrate.SeqRead, BlockSize: 4 << 20, IODepth: 8, BytesPerSec: 100 << 20, IOPS: 25}}}}
	var md strings.Builder
	WriteMarkdown(&md, v2, Summarize(v2), "")
	for _, want := range []string{"# Contention on cgroup v2", "cgroup v2 (io controller and memory controller on", "over a file in /mnt/vda;",
		"io.stat rbytes + wbytes sampled", "only ratios within this run", "io.cost.model: 7:64 ctrl=user model=linear rbps=1000",
		"| seqread | 4194304 | 8 | 100.0 | 25 |", "## What cgroup v2 charges", "(io.max rbps/wbps)", "mechanism iocost-weight"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("v2 Markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, not := range []string{"blkio", "What cgroup v1"} {
		if strings.Contains(md.String(), not) {
			t.Errorf("v2 Markdown mentions %q:\n%s", not, md.String())
		}
	}
	v1 := &Result{Cgroup: "v1", Plan: plan, Cells: cells}
	md.Reset()
	WriteMarkdown(&md, v1, Summarize(v1), "")
	for _, want := range []string{"# Contention: noisy", "cgroup v1 blkio, a loop device", "over a file in /var/tmp;", "blkio.throttle.io_service_bytes sampled",
		"## What cgroup v1 lets", "(blkio.throttle.*_bps_device)"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("v1 Markdown lacks %q:\n%s", want, md.String())
		}
	}
	for _, not := range []string{"iocost", "emulation", "io.stat"} {
		if strings.Contains(md.String(), not) {
			t.Errorf("v1 Markdown mentions %q:\n%s", not, md.String())
		}
	}
}
