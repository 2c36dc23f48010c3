package contention

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/benchd"
	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

func TestHostPlan(t *testing.T) {
	t.Parallel()
	p, err := HostPlanFor(ModeDefault, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []Config{"idle", "original", "ddiskqos", "static-2", "static-5", "static-10", "static-25", "static-50"}
	if !slices.Equal(p.Configs, want) || p.Trials != 3 || p.Warmup != 35*time.Second || p.Victims != 65*time.Second ||
		p.Light != 8 || p.LightIOPS != 5 || p.WebIOPS != 100 || p.MaxLoad != 1 {
		t.Errorf("default host plan %+v", p)
	}
	// 3 × (idle 67 s + 7 × 106 s) + 10 s probe + 1 min.
	if e := p.Estimate(); e != 3*(67+7*106)*time.Second+10*time.Second+time.Minute {
		t.Errorf("estimate %s", e)
	}
	if full, _ := HostPlanFor(ModeFull, 0); full.Trials != 5 || full.Estimate() < 65*time.Minute || full.Estimate() > 75*time.Minute {
		t.Errorf("full: %d trials, estimate %s", full.Trials, full.Estimate())
	}
	if q, _ := HostPlanFor(ModeQuick, 2); q.Trials != 2 || q.Warmup >= p.Warmup || q.Victims >= p.Victims {
		t.Errorf("quick with 2 trials: %+v", q)
	}
	for _, c := range []struct {
		c     Config
		share float64
		ok    bool
	}{{"static-2", 0.02, true}, {"static-50", 0.5, true}, {"static-7", 0.07, true}, {"static-95", 0.95, true},
		{"static-0", 0, false}, {"static-100", 0, false}, {"static-07", 0, false}, {"static-x", 0, false}, {DDiskQoS, 0, false}} {
		if s, ok := c.c.CapShare(); s != c.share || ok != c.ok {
			t.Errorf("%s: CapShare %g %v", c.c, s, ok)
		}
	}
	if err := p.Select([]string{"static-10", "ddiskqos", "static-10"}); err != nil || !slices.Equal(p.Configs, []Config{Idle, Original, DDiskQoS, "static-10"}) {
		t.Errorf("Select: %v %v", err, p.Configs)
	}
	// A cap beyond the default frontier's runs after the defaults.
	if err := p.Select([]string{"static-95", "static-90", "static-10"}); err != nil || !slices.Equal(p.Configs, []Config{Idle, Original, "static-10", "static-90", "static-95"}) {
		t.Errorf("Select with caps beyond the defaults: %v %v", err, p.Configs)
	}
	for _, c := range []struct {
		c  Config
		m  float64
		ok bool
	}{{"ddiskqos-4x", 4, true}, {"ddiskqos-1x", 1, true}, {"ddiskqos-2.5x", 2.5, true}, {"ddiskqos-100x", 100, true},
		{"ddiskqos-0.5x", 0, false}, {"ddiskqos-101x", 0, false}, {"ddiskqos-04x", 0, false}, {"ddiskqos-4", 0, false},
		{"ddiskqos-x", 0, false}, {"ddiskqos-bfq", 0, false}, {DDiskQoS, 0, false}, {"static-4x", 0, false}} {
		if m, ok := c.c.TargetMultiple(); m != c.m || ok != c.ok {
			t.Errorf("%s: TargetMultiple %g %v, want %g %v", c.c, m, ok, c.m, c.ok)
		}
	}
	if TargetConfig(4) != "ddiskqos-4x" || TargetConfig(2.5) != "ddiskqos-2.5x" {
		t.Errorf("TargetConfig: %s %s", TargetConfig(4), TargetConfig(2.5))
	}
	// Other targets run after the defaults and the caps, lowest first.
	if err := p.Select([]string{"ddiskqos-6x", "static-95", "ddiskqos", "ddiskqos-4x"}); err != nil ||
		!slices.Equal(p.Configs, []Config{Idle, Original, DDiskQoS, "static-95", "ddiskqos-4x", "ddiskqos-6x"}) {
		t.Errorf("Select with other targets: %v %v", err, p.Configs)
	}
	// Re-armed caps run after the static ones, lowest first.
	if err := p.Select([]string{"rearm-20", "static-10", "rearm-5", "ddiskqos"}); err != nil ||
		!slices.Equal(p.Configs, []Config{Idle, Original, DDiskQoS, "static-10", "rearm-5", "rearm-20"}) {
		t.Errorf("Select with re-armed caps: %v %v", err, p.Configs)
	}
	for _, c := range []struct {
		c     Config
		share float64
		ok    bool
	}{{"rearm-10", 0.1, true}, {RearmConfig(5), 0.05, true}, {"rearm-0", 0, false}, {"rearm-100", 0, false}, {"static-10", 0, false}} {
		if s, ok := c.c.RearmShare(); s != c.share || ok != c.ok {
			t.Errorf("%s: RearmShare %g %v", c.c, s, ok)
		}
	}
	if d := HostDescribe("rearm-10", "v2"); !strings.Contains(d, "io.max rbps") || !strings.Contains(d, "every 10ms") {
		t.Errorf("HostDescribe(rearm-10) = %q", d)
	}
	if d := HostDescribe("ddiskqos-4x", "v1"); !strings.Contains(d, "latency_target 4x") {
		t.Errorf("HostDescribe(ddiskqos-4x) = %q", d)
	}
	before := slices.Clone(p.Configs)
	for _, bad := range [][]string{{"bfq"}, {"static-100"}, {"static-0"}, {"rearm-100"}, {"throttle-fixed"}, {"ddiskqos-0.5x"}, {"ddiskqos-4"}} {
		if err := p.Select(bad); err == nil || !strings.Contains(err.Error(), bad[0]) || !slices.Equal(p.Configs, before) {
			t.Errorf("Select(%q): %v, configs %v", bad, err, p.Configs)
		}
	}
	if err := p.SetScheduler("bfq"); err != nil || p.Scheduler != "bfq" {
		t.Errorf("bfq: %v %q", err, p.Scheduler)
	}
	if err := p.SetScheduler("kyber"); err == nil || !strings.Contains(err.Error(), "kyber") || p.Scheduler != "bfq" {
		t.Errorf("kyber: %v %q", err, p.Scheduler)
	}
	if err := p.SetPhases(2*time.Second, 3*time.Second); err != nil || p.Warmup != 2*time.Second || p.Victims != 3*time.Second {
		t.Errorf("SetPhases: %v %+v", err, p)
	}
	if err := p.SetPhases(0, 500*time.Millisecond); err == nil || p.Victims != 3*time.Second {
		t.Errorf("victims of 500ms accepted: %v", err)
	}
}

func TestLoadTooHigh(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		load string
		busy bool
	}{{"0.40", false}, {"1.00", false}, {"1.01", true}, {"601", true}, {"", true}, {"x", true}} {
		if why := LoadTooHigh(c.load, 1); (why != "") != c.busy {
			t.Errorf("load %q: %q", c.load, why)
		}
	}
}

func TestPooled(t *testing.T) {
	t.Parallel()
	var us []float64
	for i := 1000; i >= 1; i-- {
		us = append(us, float64(i))
	}
	l := pooled(us)
	if l.P50 != 500 || l.P90 != 900 || l.P99 != 990 || l.P999 != 999 || l.Max != 1000 {
		t.Errorf("pooled 1..1000: %+v", l)
	}
	if us[0] != 1000 {
		t.Error("pooled sorted its input")
	}
	if l := pooled(nil); l != (workload.Latency{}) {
		t.Errorf("pooled(nil) = %+v", l)
	}
	if l := pooled([]float64{7}); l.P50 != 7 || l.P999 != 7 {
		t.Errorf("pooled one: %+v", l)
	}
	// A victim's first second: 5 requests at 5/s, 100 at 100/s (all of
	// a shorter list).
	if got := afterFirstSecond([]float64{9, 9, 9, 9, 9, 1, 2}, 5); !slices.Equal(got, []float64{1, 2}) {
		t.Errorf("after the first second at 5/s: %v, want [1 2]", got)
	}
	if got := afterFirstSecond([]float64{9, 9}, 100); len(got) != 0 {
		t.Errorf("after the first second at 100/s of 2 requests: %v, want none", got)
	}
}

func TestFrontier(t *testing.T) {
	t.Parallel()
	caps := []FrontierPoint{ // out of order on purpose
		{"static-10", 0.10, 6}, {"static-2", 0.02, 1}, {"static-5", 0.05, 3}, {"static-50", 0.5, 40}, {"static-25", 0.25, 20},
	}
	for _, c := range []struct {
		name        string
		share, p99  float64
		beyond, def bool
		frontier    float64
		lo, hi      Config
	}{
		{"between 5 and 10, below", 0.08, 4, true, true, 4.8, "static-5", "static-10"},
		{"between 5 and 10, above", 0.08, 5, false, true, 4.8, "static-5", "static-10"},
		{"on a cap, equal is not beyond", 0.10, 6, false, true, 6, "static-5", "static-10"},
		{"the issue's ddiskqos: 8 %, 30.7×", 0.08, 30.7, false, true, 4.8, "static-5", "static-10"},
		{"above the largest share, lower", 0.9, 30, true, true, 40, "static-50", "static-50"},
		{"below the smallest share", 0.01, 0.5, false, false, math.NaN(), "", ""},
	} {
		v := Frontier("web", FrontierPoint{DDiskQoS, c.share, c.p99}, caps)
		if v.Beyond != c.beyond || v.Defined != c.def || v.Lo != c.lo || v.Hi != c.hi ||
			(c.def && math.Abs(v.Frontier-c.frontier) > 1e-9) || (!c.def && !math.IsNaN(v.Frontier)) {
			t.Errorf("%s: %+v", c.name, v)
		}
		if _, err := json.Marshal(v); err != nil {
			t.Errorf("%s: JSON: %v", c.name, err)
		}
	}
	if v := Frontier("web", FrontierPoint{DDiskQoS, 0.1, 1}, nil); v.Beyond || v.Defined {
		t.Errorf("no caps: %+v", v)
	}
}

// hostCellOf builds a host cell: web p99, light p99 (p99.9 twice each),
// a cold read per size, and the streamer's throughput during and after.
func hostCellOf(c Config, web, light, cold, during, after float64) HostCell {
	cell := HostCell{Trial: 1, Config: c, Web: workload.Latency{P50: web / 4, P99: web, P999: 2 * web}, WebOps: 100,
		Light: workload.Latency{P50: light / 4, P99: light, P999: 2 * light}, LightOps: 80, Cold: [][]float64{{cold}, {cold * 5}},
		WebSettled: workload.Latency{P99: web / 2, P999: web}, LightSettled: workload.Latency{P99: light / 2, P999: light}}
	if c != Idle {
		cell.Streamer = &StreamerStats{Warm: Window{Cgroup: 1000}, During: Window{Cgroup: during}, After1: Window{Cgroup: after / 2}, AfterRest: Window{Cgroup: after}}
		if s, ok := c.CapShare(); ok {
			cell.Streamer.Cap = uint64(1000 * s)
		}
	}
	if c == DDiskQoS {
		cell.Daemon = &DaemonStats{Mechanism: "throttle", Stats: benchd.Stats{Ticks: 100}}
	}
	return cell
}

func hostResult(load string, cells ...HostCell) *HostResult {
	p, _ := HostPlanFor(ModeDefault, 1)
	return &HostResult{Scenario: ScenarioHost, Command: "ddiskqos bench contention --scenario host", Build: report.Build{Revision: "abc123", Modified: true}, Plan: p,
		Cgroup: "v1", Scheduler: "none", DefaultScheduler: "none", Unloaded: workload.Latency{P50: 100, P99: 200, P999: 300},
		LoadStart: load, LoadEnd: "0.5", Start: time.Date(2026, 11, 25, 21, 0, 0, 0, time.UTC), End: time.Date(2026, 11, 25, 21, 42, 0, 0, time.UTC),
		Cells: cells}
}

func TestSummarizeHost(t *testing.T) {
	t.Parallel()
	r := hostResult("0.30",
		hostCellOf(Idle, 500, 400, 10, 0, 0),
		hostCellOf(Original, 64000, 70000, 90, 1000, 1000), // 128× and 175×
		hostCellOf(DDiskQoS, 1000, 800, 20, 150, 950),      // 2×, 2×; 15 %, 95 %: every bar, beyond the frontier on both
		hostCellOf("static-2", 500, 400, 11, 20, 20),
		hostCellOf("static-5", 1500, 500, 12, 50, 50),
		hostCellOf("static-10", 3200, 400, 13, 100, 100),
		hostCellOf("static-25", 10000, 4000, 20, 250, 250),
		hostCellOf("static-50", 25000, 20000, 40, 500, 500),
	)
	r.Cells[2].WebSettled.P99 = 600 // ddiskqos's first second held its web p99's worst
	s := SummarizeHost(r)
	if len(s.NotQuiet) != 0 || s.IdleWebP99us.Median != 500 || s.UnloadedP99us != 200 {
		t.Fatalf("summary %+v", s)
	}
	if len(s.Rows) != 7 {
		t.Fatalf("%d rows, want 7", len(s.Rows))
	}
	o, d := s.Rows[0], s.Rows[1]
	if o.Config != Original || o.WebP99.Median != 128 || o.LightP99.Median != 175 || o.Cold[1].Median != 9 || o.During.Median != 1 {
		t.Errorf("original %+v", o)
	}
	if d.Config != DDiskQoS || d.WebP99.Median != 2 || d.WebP999.Median != 2 || d.LightP99.Median != 2 || d.During.Median != 0.15 || d.After.Median != 0.95 {
		t.Errorf("ddiskqos %+v", d)
	}
	if d.WebP99Settled.Median != 2.4 || d.WebP999Settled.Median != 2 || d.LightP99Settled.Median != 2 || d.LightP999Settled.Median != 2 {
		t.Errorf("ddiskqos from the 2nd second: web %v / %v, light %v / %v; want 2.4× (600 ÷ 250), then 2×",
			d.WebP99Settled.Median, d.WebP999Settled.Median, d.LightP99Settled.Median, d.LightP999Settled.Median)
	}
	if s.Rows[2].CapMiBs != 20.0/(1<<20) {
		t.Errorf("static-2 cap %g MiB/s", s.Rows[2].CapMiBs)
	}
	// Web: ddiskqos at 15 % between static-10 (10 %, 6.4×) and static-25
	// (25 %, 20×): frontier 6.4+(1/3)·13.6 = 10.93×; ddiskqos 2×.
	if len(s.Frontiers) != 2 || !s.Frontiers[0].Beyond || math.Abs(s.Frontiers[0].Frontier-(6.4+13.6/3)) > 1e-9 || !s.Frontiers[1].Beyond {
		t.Errorf("frontiers %+v", s.Frontiers)
	}
	// Contention, six of ddiskqos, the daemon, two of domination; the two
	// frontiers and the share are goals.
	if s.Missed != 0 || len(s.Bars) != 13 || countBars(s.Bars) != 10 {
		t.Errorf("missed %d of %d bars: %+v", s.Missed, len(s.Bars), s.Bars)
	}
	if g := s.Bars[len(s.Bars)-1]; !g.Goal || g.Met {
		t.Errorf("goal bar %+v: 15 %% < 25 %%", g)
	}

	// The measurement: ddiskqos at 8 % of the streamer with web
	// 30.7× and light 78.5×, a daemon that logged errors, a busy host
	// and an idle p99 far above the unloaded one.
	bad := hostResult("3.5",
		hostCellOf(Idle, 2500, 400, 10, 0, 0),
		hostCellOf(Original, 20000, 70000, 90, 1000, 1000), // 8×: no contention by the bar
		hostCellOf(DDiskQoS, 76750, 31400, 20, 80, 500),
		hostCellOf("static-5", 7500, 340, 12, 50, 50),
		hostCellOf("static-10", 16000, 344, 13, 100, 100),
	)
	bad.Cells[2].Daemon.Errors = map[string]int{"apply": 1}
	s = SummarizeHost(bad)
	if len(s.NotQuiet) != 2 || !strings.Contains(s.NotQuiet[0], "3.5") || !strings.Contains(s.NotQuiet[1], "2500 µs") {
		t.Errorf("not quiet: %q", s.NotQuiet)
	}
	missed := map[string]bool{}
	for _, b := range s.Bars {
		if !b.Met && !b.Goal {
			missed[b.What] = true
		}
	}
	for _, w := range []string{"contention exists: web p99 ÷ idle", "web p99 ÷ idle", "light p99 ÷ idle", "web p99.9 ÷ idle", "light p99.9 ÷ idle",
		"streamer during ÷ no QoS", "streamer from 1 s after ÷ no QoS", "the daemon stays up: cells with it ticking and no error"} {
		if !missed[w] {
			t.Errorf("bar %q not missed", w)
		}
	}
	if len(s.Frontiers) != 2 || s.Frontiers[0].Beyond || s.Frontiers[1].Beyond || s.Missed != 10 {
		t.Errorf("missed %d; frontiers %+v", s.Missed, s.Frontiers)
	}
	// ddiskqos at 8 %, web 30.7×, light 78.5×: web dominated by static-10
	// (10 %, 6.4×) and no QoS (100 %, 8×); light by static-10 alone
	// (0.86×; no QoS is 175×).
	for _, b := range s.Bars {
		switch {
		case strings.HasPrefix(b.What, "not dominated: peers giving both a lower web"):
			if b.Met || b.Value != 2 || !strings.Contains(b.Note, "static-10") || !strings.Contains(b.Note, "original") {
				t.Errorf("web domination %+v", b)
			}
		case strings.HasPrefix(b.What, "not dominated: peers giving both a lower light"):
			if b.Met || b.Value != 1 || !strings.Contains(b.Note, "static-10") {
				t.Errorf("light domination %+v", b)
			}
		}
	}
}

// TestSummarizeHostSchedulerIdle: an idle far above the unloaded device
// under a scheduler that is not the device's default (BFQ's idling: the
// victims wait on one another) is said in the report, not taken for a busy
// host; under the default scheduler it still is. Mutation checked: the
// scheduler test removed, the bfq run is not quiet.
func TestSummarizeHostSchedulerIdle(t *testing.T) {
	t.Parallel()
	cells := func() []HostCell {
		return []HostCell{hostCellOf(Idle, 2500, 4000, 10, 0, 0), hostCellOf(Original, 250000, 400000, 90, 1000, 1000), hostCellOf(DDiskQoS, 5000, 8000, 20, 150, 950)}
	}
	r := hostResult("0.30", cells()...)
	r.Scheduler = "bfq"
	s := SummarizeHost(r)
	if len(s.NotQuiet) != 0 || !strings.Contains(s.IdleNote, "bfq") || !strings.Contains(s.IdleNote, "12.5×") || !strings.Contains(s.IdleNote, "2500 µs") {
		t.Fatalf("bfq: not quiet %q, idle note %q; want quiet and the idle said (2500 µs, 12.5× the unloaded 200 µs)", s.NotQuiet, s.IdleNote)
	}
	var b strings.Builder
	WriteHostMarkdown(&b, r, s, "")
	if !strings.Contains(b.String(), "**Idle is slow:**") || strings.Contains(b.String(), "Not a quiet host") {
		t.Errorf("bfq report does not say its slow idle, or calls the host busy:\n%s", b.String())
	}
	r = hostResult("0.30", cells()...)
	if s = SummarizeHost(r); len(s.NotQuiet) != 1 || s.IdleNote != "" {
		t.Errorf("default scheduler: not quiet %q, idle note %q; want the slow idle taken for a busy host", s.NotQuiet, s.IdleNote)
	}
}

func TestDominators(t *testing.T) {
	t.Parallel()
	peers := []FrontierPoint{{"original", 1, 1.75}, {"static-50", 0.5, 1.13}, {"static-10", 0.1, 0.9}, {"bfq", math.NaN(), 1}}
	for _, c := range []struct {
		name       string
		share, p99 float64
		want       []Config
	}{
		{"the 50 MB/s cell: 96 % at 1.26×, beyond no one's share", 0.96, 1.26, nil},
		{"no QoS is better on both", 0.9, 1.8, []Config{"original"}},
		{"a cap at more share, lower p99", 0.4, 1.2, []Config{"static-50"}},
		{"equal on both is not dominated", 0.5, 1.13, nil},
		{"equal share, lower p99 dominates", 0.1, 1.0, []Config{"static-10"}},
		{"a point with no value", math.NaN(), 1, nil},
	} {
		var got []Config
		for _, p := range Dominators(FrontierPoint{DDiskQoS, c.share, c.p99}, peers) {
			got = append(got, p.Config)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestWriteHostMarkdown(t *testing.T) {
	t.Parallel()
	r := hostResult("3.5",
		hostCellOf(Idle, 500, 400, 10, 0, 0),
		hostCellOf(Original, 64000, 70000, 90, 1000, 1000),
		hostCellOf(DDiskQoS, 1000, 800, 20, 150, 950),
		hostCellOf("static-10", 3200, 400, 13, 100, 100),
	)
	r.Plan.Configs = []Config{Idle, Original, DDiskQoS, "static-10"}
	s := SummarizeHost(r)
	var md strings.Builder
	WriteHostMarkdown(&md, r, s, "contention-host.svg")
	for _, want := range []string{
		"Regenerate with `ddiskqos bench contention --scenario host`",
		"Built from `abc123 (modified tree)`, measured 2026-11-25 (21:00 to 21:42 UTC)",
		"**Not a quiet host — written only because of --allow-busy",
		"1-minute load average 3.5 at the start, above 1",
		"| ddiskqos | 2.00× | 2.00× | 2.00× | 2.00× | 2.00× | 2.00× | 15 % | 95 % | 1000 µs | 800 µs |",
		"| original | contention exists: web p99 ÷ idle ≥ 10× | 128× | met |",
		"## The victims' first second",
		"(web 100, each light tenant 5)",
		"| ddiskqos | 2.00× / 2.00× | 2.00× / 2.00× | 2.00× / 2.00× | 2.00× / 2.00× |",
		"| ddiskqos | web p99 ÷ idle ≤ 3× | 2.00× | met |",
		"| ddiskqos | streamer from 1 s after ÷ no QoS ≥ 90 % | 95 % | met |",
		"at or above the largest cap's share (static-10, 10 %)",
		"| ddiskqos | goal past the bar: streamer during ÷ no QoS ≥ 50 % | 15 % | goal not reached |",
		// light: 2× beside static-10's 1× at a smaller share: not dominated,
		// the frontier a goal not reached
		"| ddiskqos | not dominated: peers giving both a lower light p99 ÷ idle and a larger share (peers dominating: none) | 0 | met |",
		"light p99 ÷ idle below the frontier's at the streamer's share (frontier 1.00×, at or above the largest cap's share (static-10, 10 %)) | 2.00× | goal not reached |",
		"0 of 10 bars missed.",
		"- `static-10`: no QoS but a static cap on the streamer at 10 %",
		"![victim p99",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md.String())
		}
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("summary JSON: %v", err)
	}
	quiet := hostResult("0.2", r.Cells...)
	quiet.Plan.Configs = r.Plan.Configs
	md.Reset()
	WriteHostMarkdown(&md, quiet, SummarizeHost(quiet), "")
	if strings.Contains(md.String(), "Not a quiet host") || !strings.Contains(md.String(), "Quiet host: the 1-minute load average was 0.2") {
		t.Errorf("quiet report:\n%s", md.String())
	}
}

// TestRunHostRefusesBusyHost: a load average above the plan's maximum at
// the start ends the run at once with ErrNotQuiet, before it creates
// anything (no root needed: it never gets that far); --allow-busy's
// option lets it past that check.
func TestRunHostRefusesBusyHost(t *testing.T) {
	t.Parallel()
	proc := t.TempDir()
	if err := os.WriteFile(filepath.Join(proc, "loadavg"), []byte("5.37 2.10 1.00 3/900 12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := HostPlanFor(ModeQuick, 0)
	sys := filepath.Join(t.TempDir(), "no-sys")
	res, err := RunHost(t.Context(), HostOptions{Plan: p, Exe: "/nonexistent", Roots: host.Roots{Sys: sys, Proc: proc}})
	if !errors.Is(err, ErrNotQuiet) || !strings.Contains(err.Error(), "5.37") || !strings.Contains(err.Error(), "--allow-busy") {
		t.Fatalf("busy host: %v", err)
	}
	if res == nil || res.LoadStart != "5.37" || res.Device != "" || len(res.Cells) != 0 {
		t.Errorf("result %+v", res)
	}
	// Allowed, it goes on and fails at the first thing it needs of the
	// (missing) kernel filesystems, not at the load.
	res, err = RunHost(t.Context(), HostOptions{Plan: p, Exe: "/nonexistent", Roots: host.Roots{Sys: sys, Proc: proc}, AllowBusy: true})
	if err == nil || errors.Is(err, ErrNotQuiet) || !res.AllowBusy {
		t.Errorf("allowed busy host: %v, %+v", err, res)
	}
}

// The light tenants start spread over one period, each in its own part
// of it, the same in a trial's every cell and different between trials.
func TestLightPhases(t *testing.T) {
	period := 200 * time.Millisecond
	a, b := lightPhases(8, 5, 0), lightPhases(8, 5, 1)
	if len(a) != 8 || slices.Equal(a, b) || !slices.Equal(a, lightPhases(8, 5, 0)) {
		t.Fatalf("phases %v (trial 0), %v (trial 1)", a, b)
	}
	for i, d := range a {
		lo, hi := period*time.Duration(i)/8, period*time.Duration(i+1)/8
		if d < lo || d >= hi {
			t.Errorf("tenant %d starts at %v, want in [%v, %v)", i, d, lo, hi)
		}
	}
	if got := lightPhases(0, 5, 0); len(got) != 0 {
		t.Errorf("no tenants: %v", got)
	}
}

// TestSetStreamer: the host scenario's streamer names, and a bad one named
// in its error with the plan unchanged.
func TestSetStreamer(t *testing.T) {
	t.Parallel()
	p, err := HostPlanFor(ModeQuick, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, good := range []string{"paced-50-qd1", "paced-200-qd4", "greedy", ""} {
		if err := p.SetStreamer(good); err != nil {
			t.Errorf("SetStreamer(%q): %v", good, err)
		}
	}
	if err := p.SetStreamer("paced-200-qd4"); err != nil || !p.Moderate() {
		t.Fatalf("paced-200-qd4: %v, moderate %v", err, p.Moderate())
	}
	for _, bad := range []string{"paced-50", "paced-0-qd1", "paced-50-qd0", "paced-050-qd1", "fast"} {
		if err := p.SetStreamer(bad); err == nil || !strings.Contains(err.Error(), strconv.Quote(bad)) {
			t.Errorf("SetStreamer(%q): %v, want an error naming it", bad, err)
		}
		if p.Streamer != "paced-200-qd4" {
			t.Fatalf("a bad streamer changed the plan: %q", p.Streamer)
		}
	}
	if rate, depth, ok := pacedStreamer("paced-200-qd4"); !ok || rate != 200e6 || depth != 4 {
		t.Errorf("paced-200-qd4: %d B/s, depth %d, %v", rate, depth, ok)
	}
}
