package paper

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/benchd"
	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

func TestStatOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   []float64
		want Stat
	}{
		{nil, Stat{}},
		{[]float64{3}, Stat{N: 1, Median: 3, Min: 3, Max: 3}},
		{[]float64{4, 1, 3, 2}, Stat{N: 4, Median: 2.5, Min: 1, Max: 4}},
		{[]float64{5, 1, 9}, Stat{N: 3, Median: 5, Min: 1, Max: 9}},
	} {
		if got := statOf(tc.in); got != tc.want {
			t.Errorf("statOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestUnionAndBytesIn(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	u := union([]window{{at(50), at(60)}, {at(0), at(10)}, {at(5), at(20)}, {at(30), at(30)}})
	if len(u) != 2 || !u[0].from.Equal(at(0)) || !u[0].to.Equal(at(20)) || !u[1].from.Equal(at(50)) {
		t.Fatalf("union = %+v", u)
	}
	// 1 byte per ms, sampled every 10 ms.
	s := &sampler{}
	for ms := 0; ms <= 100; ms += 10 {
		s.pts = append(s.pts, point{at(ms), uint64(ms)})
	}
	by, secs := s.bytesIn([]window{{at(5), at(25)}, {at(20), at(35)}, {at(90), at(200)}})
	// [5,35] = 30 bytes; [90, 200] clamps at the last sample: 10 bytes.
	if math.Abs(by-40) > 1e-9 || math.Abs(secs-0.140) > 1e-9 {
		t.Errorf("bytesIn = %v bytes over %v s, want 40 over 0.140", by, secs)
	}
}

func TestSummarizeAndReport(t *testing.T) {
	t.Parallel()
	p, err := PlanFor(ModeQuick, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &Result{Command: "ddiskqos bench paper --quick", Plan: p}
	read := map[string]float64{CfgIdle: 0.001, CfgOriginal: 0.005, CfgBFQ: 0.002, CfgStatic: 0.0011, CfgDdiskqos: 0.0011, CfgPaper: 0.0012}
	for cfg, sec := range read {
		for _, size := range p.Sizes {
			r.Samples = append(r.Samples, Sample{Config: cfg, Scenario: "table3", Reader: sizeLabel(size), Bytes: size, Seconds: sec})
		}
		for _, rd := range p.Table5 {
			r.Samples = append(r.Samples, Sample{Config: cfg, Scenario: "table5", Reader: rd.Label(), Bytes: rd.Size, Seconds: sec})
		}
		r.Samples = append(r.Samples, Sample{Config: cfg, Scenario: "interactive", Reader: "4k-rand", Bytes: 4096, Seconds: 2,
			Latency: &workload.Latency{P50: 300, P99: 900, P999: 2000, Max: 2500}})
	}
	r.Phases = []Phase{
		{Config: CfgSolo, BulkQuietBps: 1000e6},
		{Config: CfgStatic, BulkContentionBps: 100e6, BulkContentionSecs: 1, BulkQuietBps: 990e6},
		{Config: CfgDdiskqos, BulkContentionBps: 400e6, BulkContentionSecs: 1, BulkQuietBps: 960e6,
			Daemon: &DaemonStats{Mechanism: "throttle", Scheduler: "none", Stats: benchd.Stats{Ticks: 20}}},
	}
	s := Summarize(r)
	if len(s.Bar) != 4 {
		t.Fatalf("bar = %+v", s.Bar)
	}
	for _, b := range s.Bar {
		if !b.Pass {
			t.Errorf("bar check %q = %.2f fails, want pass", b.What, b.Value)
		}
	}
	if got := s.Table3["1MiB"][CfgOriginal].Median; got != 0.005 {
		t.Errorf("Table 3 1MiB original = %v", got)
	}
	r.Build = report.Build{Revision: "unknown"}
	var md, svg strings.Builder
	WriteMarkdown(&md, r, s, "paper.svg")
	WriteSVG(&svg, r, s)
	for _, want := range []string{"## Table 3", "| 1MiB | 3.00 ms | 2.00 ms | 1.00 ms |", "64MiB@2s", "**pass**", "`throttle` on `none`", "Built from `unknown (no VCS stamp in the binary)`"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if !strings.HasPrefix(svg.String(), "<svg") || !strings.Contains(svg.String(), "T5 64MiB@2s") {
		t.Errorf("svg: %.200s", svg.String())
	}
}
