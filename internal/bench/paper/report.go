package paper

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"
)

// Stat is the median and spread of a set of values.
type Stat struct {
	N      int     `json:"n"`
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(v []float64) Stat {
	if len(v) == 0 {
		return Stat{}
	}
	v = append([]float64(nil), v...)
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + v[len(v)/2]) / 2
	}
	return Stat{N: len(v), Median: m, Min: v[0], Max: v[len(v)-1]}
}

// Summary is the report's numbers, derived from a Result.
type Summary struct {
	// ReadTime[scenario][reader][config], seconds.
	Table3 map[string]map[string]Stat `json:"table3_seconds"`
	Table5 map[string]map[string]Stat `json:"table5_seconds"`
	// Interactive latency per config, µs: medians over trials.
	Interactive map[string]map[string]Stat `json:"interactive_latency_us"`
	// Bulk throughput per config, bytes/s.
	BulkContention map[string]Stat `json:"bulk_contention_bps"`
	BulkQuiet      map[string]Stat `json:"bulk_quiet_bps"`
	CPU            map[string]Stat `json:"cpu_seconds_per_phase"`
	Wall           map[string]Stat `json:"wall_seconds_per_phase"`
	Bar            []BarCheck      `json:"bar"`
}

// BarCheck is one criterion of the report's bar.
type BarCheck struct {
	What   string  `json:"what"`
	Value  float64 `json:"value"`
	Limit  float64 `json:"limit"`
	AtMost bool    `json:"at_most"` // Value ≤ Limit passes; else Value ≥ Limit
	Pass   bool    `json:"pass"`
	Detail string  `json:"detail"`
}

// Summarize derives the report's numbers.
func Summarize(r *Result) Summary {
	s := Summary{Table3: map[string]map[string]Stat{}, Table5: map[string]map[string]Stat{},
		Interactive: map[string]map[string]Stat{}, BulkContention: map[string]Stat{}, BulkQuiet: map[string]Stat{},
		CPU: map[string]Stat{}, Wall: map[string]Stat{}}
	group := map[[3]string][]float64{}
	lat := map[[2]string][]float64{}
	for _, x := range r.Samples {
		switch x.Scenario {
		case "interactive":
			if x.Latency != nil {
				lat[[2]string{x.Config, "p50"}] = append(lat[[2]string{x.Config, "p50"}], x.Latency.P50)
				lat[[2]string{x.Config, "p99"}] = append(lat[[2]string{x.Config, "p99"}], x.Latency.P99)
				lat[[2]string{x.Config, "p99.9"}] = append(lat[[2]string{x.Config, "p99.9"}], x.Latency.P999)
				lat[[2]string{x.Config, "max"}] = append(lat[[2]string{x.Config, "max"}], x.Latency.Max)
			}
		default:
			k := [3]string{x.Scenario, x.Reader, x.Config}
			group[k] = append(group[k], x.Seconds)
		}
	}
	for k, v := range group {
		m := s.Table3
		if k[0] == "table5" {
			m = s.Table5
		}
		if m[k[1]] == nil {
			m[k[1]] = map[string]Stat{}
		}
		m[k[1]][k[2]] = statOf(v)
	}
	for k, v := range lat {
		if s.Interactive[k[0]] == nil {
			s.Interactive[k[0]] = map[string]Stat{}
		}
		s.Interactive[k[0]][k[1]] = statOf(v)
	}
	cont, quiet, cpu, wall := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	for _, p := range r.Phases {
		if p.BulkContentionSecs > 0 {
			cont[p.Config] = append(cont[p.Config], p.BulkContentionBps)
		}
		if p.BulkQuietBps > 0 {
			quiet[p.Config] = append(quiet[p.Config], p.BulkQuietBps)
		}
		cpu[p.Config] = append(cpu[p.Config], p.CPUSeconds)
		wall[p.Config] = append(wall[p.Config], p.WallSeconds)
	}
	for c, v := range cont {
		s.BulkContention[c] = statOf(v)
	}
	for c, v := range quiet {
		s.BulkQuiet[c] = statOf(v)
	}
	for c, v := range cpu {
		s.CPU[c] = statOf(v)
	}
	for c, v := range wall {
		s.Wall[c] = statOf(v)
	}
	s.Bar = bar(r, s)
	return s
}

func bar(r *Result, s Summary) []BarCheck {
	var out []BarCheck
	for _, size := range []int64{1 * mib, 10 * mib} {
		l := sizeLabel(size)
		d, i := s.Table3[l][CfgDdiskqos], s.Table3[l][CfgIdle]
		if d.N == 0 || i.N == 0 {
			continue
		}
		v := d.Median / i.Median
		out = append(out, BarCheck{What: l + " read, ddiskqos / idle", Value: v, Limit: 1.2, AtMost: true, Pass: v <= 1.2,
			Detail: fmt.Sprintf("%s vs %s", ms(d.Median), ms(i.Median))})
	}
	if d, st := s.BulkContention[CfgDdiskqos], s.BulkContention[CfgStatic]; d.N > 0 && st.N > 0 && st.Median > 0 {
		v := d.Median / st.Median
		out = append(out, BarCheck{What: "bulk throughput while small reads run, ddiskqos / static", Value: v, Limit: 1.3,
			Pass: v >= 1.3, Detail: fmt.Sprintf("%s vs %s", mbps(d.Median), mbps(st.Median))})
	}
	if d, so := s.BulkQuiet[CfgDdiskqos], s.BulkQuiet[CfgSolo]; d.N > 0 && so.N > 0 && so.Median > 0 {
		v := d.Median / so.Median
		out = append(out, BarCheck{What: "bulk throughput with no small reader, ddiskqos / solo", Value: v, Limit: 0.95,
			Pass: v >= 0.95, Detail: fmt.Sprintf("%s vs %s", mbps(d.Median), mbps(so.Median))})
	}
	return out
}

func ms(sec float64) string {
	switch {
	case sec >= 10:
		return fmt.Sprintf("%.1f s", sec)
	case sec >= 1:
		return fmt.Sprintf("%.2f s", sec)
	case sec >= 0.1:
		return fmt.Sprintf("%.0f ms", sec*1e3)
	case sec >= 0.01:
		return fmt.Sprintf("%.1f ms", sec*1e3)
	}
	return fmt.Sprintf("%.2f ms", sec*1e3)
}

func mbps(bps float64) string { return fmt.Sprintf("%.0f MB/s", bps/1e6) }

// paperTable3 and paperTable5 are the paper's numbers, seconds.
var paperTable3 = map[string][2]float64{
	"1MiB": {0.003, 0.002}, "10MiB": {0.0331, 0.0227}, "100MiB": {2.85, 2.25}, "1000MiB": {28.6, 23.5},
}

var paperTable5 = map[string][2]float64{
	"2MiB@2s": {0.006, 0.005}, "64MiB@2s": {1.9, 1.7}, "16MiB@3s": {0.0502, 0.0436}, "4MiB@4s": {0.0124, 0.0113},
}

// columns are the configurations of the read-time tables, idle first.
var columns = append([]string{CfgIdle}, Compared...)

func cell(st Stat) string {
	if st.N == 0 {
		return "—"
	}
	if st.N == 1 {
		return ms(st.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", ms(st.Median), ms(st.Min), ms(st.Max))
}

func ratioCell(a, b Stat) string {
	if a.N == 0 || b.N == 0 || b.Median == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", a.Median/b.Median)
}

// WriteMarkdown writes the report.
func WriteMarkdown(w io.Writer, r *Result, s Summary, plot string) {
	p := r.Plan
	fmt.Fprintf(w, "# `ddiskqos bench paper`: the dDiskQoS paper's experiments in real containers\n\n")
	fmt.Fprintf(w, "Regenerate (as root, on the Docker host):\n\n```\n%s\n```\n\n", r.Command)
	m := r.Machine
	fmt.Fprintf(w, "Machine: kernel %s, %d CPUs, %d MiB RAM, Docker %s, cgroup %s. Volume: ext4 on %s (default scheduler `%s`) over a file on the VM's disk (%s), loop with direct I/O. Run of %s, took %s. Built from `%s`; image binary: %s.\n\n",
		m.Kernel, m.CPUs, m.MemoryMiB, m.Docker, m.CgroupMode, m.Device, m.DefaultScheduler, m.Backing,
		r.Started.UTC().Format("2006-01-02 15:04 UTC"), time.Duration(r.Took*float64(time.Second)).Round(time.Second), r.Build, r.Image)
	fmt.Fprintf(w, "Mode `%s`: %d trials; in each, every configuration once in this order: %s. Table 3: %d read(s) of each size per configuration and trial. Cells: median (min–max) over all reads.\n\n",
		p.Mode, p.Trials, strings.Join(p.Configs, ", "), p.Reps)
	fmt.Fprintf(w, "Configurations:\n\n")
	fmt.Fprintf(w, "- `idle`: the small readers alone, default scheduler. `solo`: the bulk container alone, default scheduler.\n")
	fmt.Fprintf(w, "- `original`: default scheduler (`%s`), no QoS — the paper's Original.\n", m.DefaultScheduler)
	fmt.Fprintf(w, "- `bfq`: BFQ, equal weights, no daemon.\n")
	fmt.Fprintf(w, "- `static`: BFQ, weights written by hand into `blkio.bfq.weight_device` before the first I/O: %d for every small reader, %d for the bulk container (what `--blkio-weight` would do; dockerd 20.10 discards that flag on this kernel).\n", staticSmall, staticBulk)
	fmt.Fprintf(w, "- `ddiskqos`: the daemon in-process with its defaults (interval 1 s, thresholds 2/8/32/128 MiB, weights 1000/500/250/100, boost after 30 s) on the device as it is; mechanism %s.\n", mechOf(r, CfgDdiskqos))
	fmt.Fprintf(w, "- `paper`: ddiskqos with the paper's proceeding — blkio weights, so BFQ (mechanism %s) — and Table 1's thresholds in MB (2/8/32/128·10⁶ B).\n\n", mechOf(r, CfgPaper))
	fmt.Fprintf(w, "Every foreground container is started and held ready for %s before it is released to read (in every configuration alike: container and application start-up); the bulk container streams the %d MiB bulk file with O_DIRECT, 1 MiB per request, over and over (buffered, a file the %d MiB of RAM can cache stops loading the disk after one pass). Small readers read buffered, cold (`--drop-cache` drops the file's pages first), 1 MiB per request, as `cat` in the paper.\n\n",
		p.Gate, p.BulkFile>>20, m.MemoryMiB)

	fmt.Fprintf(w, "The disk is a VM's virtual disk that other work on the machine shares and that stalls now and then: that is why configurations interleave within each trial; single reads of 1 MiB (a millisecond or two) are at the mercy of such stalls, so read medians, not single cells.\n\n")
	fmt.Fprintf(w, "## The bar\n\n| criterion | measured | bar | |\n| --- | --- | --- | --- |\n")
	for _, b := range s.Bar {
		op := "≥"
		if b.AtMost {
			op = "≤"
		}
		v := "**pass**"
		if !b.Pass {
			v = "**miss**"
		}
		fmt.Fprintf(w, "| %s | %.2f (%s) | %s %.2f | %s |\n", b.What, b.Value, b.Detail, op, b.Limit, v)
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "## Table 3: one read under a background bulk read\n\n")
	fmt.Fprintf(w, "| Size | paper: Original | paper: dDiskQoS |")
	for _, c := range columns {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, "\n| --- | --- | --- |%s\n", strings.Repeat(" --- |", len(columns)))
	for _, size := range p.Sizes {
		l := sizeLabel(size)
		pp := paperTable3[l]
		fmt.Fprintf(w, "| %s | %s | %s |", l, ms(pp[0]), ms(pp[1]))
		for _, c := range columns {
			fmt.Fprintf(w, " %s |", cell(s.Table3[l][c]))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nAs a ratio to idle (median / idle median), and ddiskqos against each alternative (ddiskqos median / that median; below 1 is ddiskqos faster):\n\n")
	fmt.Fprintf(w, "| Size | paper: dDiskQoS/Original |")
	for _, c := range Compared {
		fmt.Fprintf(w, " %s/idle |", c)
	}
	fmt.Fprintf(w, " ddiskqos/original | ddiskqos/bfq | ddiskqos/static |\n| --- | --- |%s --- | --- | --- |\n", strings.Repeat(" --- |", len(Compared)))
	for _, size := range p.Sizes {
		l := sizeLabel(size)
		pp := paperTable3[l]
		fmt.Fprintf(w, "| %s | %.2f× |", l, pp[1]/pp[0])
		t := s.Table3[l]
		for _, c := range Compared {
			fmt.Fprintf(w, " %s |", ratioCell(t[c], t[CfgIdle]))
		}
		fmt.Fprintf(w, " %s | %s | %s |\n", ratioCell(t[CfgDdiskqos], t[CfgOriginal]), ratioCell(t[CfgDdiskqos], t[CfgBFQ]), ratioCell(t[CfgDdiskqos], t[CfgStatic]))
	}

	fmt.Fprintf(w, "\n## Table 5: readers starting 2, 2, 3 and 4 s after the background read\n\n")
	fmt.Fprintf(w, "The paper's Table 4 lists a 4 MB reader starting at 2 s where its Table 5 lists 64 MB; both run here, each on its own file, so this run has five readers (one more than the paper's).\n\n")
	fmt.Fprintf(w, "| Reader | paper: Original | paper: dDiskQoS |")
	for _, c := range columns {
		fmt.Fprintf(w, " %s |", c)
	}
	fmt.Fprintf(w, " ddiskqos/idle |\n| --- | --- | --- |%s --- |\n", strings.Repeat(" --- |", len(columns)))
	for _, rd := range p.Table5 {
		l := rd.Label()
		pp, ok := paperTable5[l]
		a, b := "—", "—"
		if ok {
			a, b = ms(pp[0]), ms(pp[1])
		}
		fmt.Fprintf(w, "| %s | %s | %s |", l, a, b)
		for _, c := range columns {
			fmt.Fprintf(w, " %s |", cell(s.Table5[l][c]))
		}
		fmt.Fprintf(w, " %s |\n", ratioCell(s.Table5[l][CfgDdiskqos], s.Table5[l][CfgIdle]))
	}

	fmt.Fprintf(w, "\n## Interactive container: 4k random reads (O_DIRECT, %d KiB/s, %s, a new container)\n\n", p.InteractiveRate>>10, p.Interactive)
	fmt.Fprintf(w, "Per-request latency from the workload's HDR histogram, median over trials.\n\n| config | p50 | p99 | p99.9 | max |\n| --- | --- | --- | --- | --- |\n")
	for _, c := range columns {
		l := s.Interactive[c]
		if l == nil {
			continue
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", c, ms(l["p50"].Median/1e6), ms(l["p99"].Median/1e6), ms(l["p99.9"].Median/1e6), ms(l["max"].Median/1e6))
	}

	fmt.Fprintf(w, "\n## Bulk container\n\nThroughput while foreground readers (Table 3 and Table 5) read, from its cgroup's counters sampled every 2 ms, and with nobody else for %s after a %s pause (work conservation). Median (min–max) over trials.\n\n", p.QuietMeasure, p.QuietSettle)
	fmt.Fprintf(w, "| config | while small reads run | ÷ static | alone afterwards | ÷ solo |\n| --- | --- | --- | --- | --- |\n")
	for _, c := range append([]string{CfgSolo}, Compared...) {
		cs, qs := s.BulkContention[c], s.BulkQuiet[c]
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", c, bpsCell(cs), ratioCell(cs, s.BulkContention[CfgStatic]), bpsCell(qs), ratioCell(qs, s.BulkQuiet[CfgSolo]))
	}

	fmt.Fprintf(w, "\n## The daemon's own cost\n\n")
	fmt.Fprintf(w, "The daemon runs inside the bench process, so its CPU is that process's CPU during the phase (bench bookkeeping, the 2 ms sampler and Docker API calls included) minus the same for the phase without a daemon on the same scheduler; and the loop's own tick time.\n\n")
	fmt.Fprintf(w, "| config | mechanism | process CPU per phase | − no-daemon phase, same scheduler | wall per phase | ticks | tick mean | tick max | level changes |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	ref := map[string]string{CfgDdiskqos: CfgOriginal, CfgPaper: CfgBFQ}
	for _, c := range Compared {
		var ticks, changes int
		var mean, mx time.Duration
		mech := ""
		n := 0
		for _, ph := range r.Phases {
			if ph.Config != c || ph.Daemon == nil {
				continue
			}
			n++
			ticks += ph.Daemon.Ticks
			changes += ph.Daemon.LevelChanges
			mean += ph.Daemon.TickMean
			mx = max(mx, ph.Daemon.TickMax)
			mech = ph.Daemon.Mechanism
		}
		if n > 0 {
			mean /= time.Duration(n)
			fmt.Fprintf(w, "| %s | %s | %.2f s | %+.2f s (vs %s) | %.1f s | %d | %s | %s | %d |\n", c, mech, s.CPU[c].Median,
				s.CPU[c].Median-s.CPU[ref[c]].Median, ref[c], s.Wall[c].Median, ticks, mean.Round(time.Microsecond), mx.Round(time.Microsecond), changes)
		} else {
			fmt.Fprintf(w, "| %s | — | %.2f s | | %.1f s | | | | |\n", c, s.CPU[c].Median, s.Wall[c].Median)
		}
	}

	fmt.Fprintf(w, "\n## What the daemon had decided when each reader was released\n\n| config | view at release | reads |\n| --- | --- | --- |\n")
	views := map[[2]string]int{}
	for _, x := range r.Samples {
		if x.Daemon != "" {
			views[[2]string{x.Config, x.Daemon}]++
		}
	}
	keys := make([][2]string, 0, len(views))
	for k := range views {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	for _, k := range keys {
		fmt.Fprintf(w, "| %s | %s | %d |\n", k[0], k[1], views[k])
	}
	if plot != "" {
		fmt.Fprintf(w, "\n## Plot\n\n![read time per size and configuration](%s)\n", plot)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
}

func bpsCell(st Stat) string {
	if st.N == 0 {
		return "—"
	}
	if st.N == 1 {
		return mbps(st.Median)
	}
	return fmt.Sprintf("%s (%.0f–%.0f)", mbps(st.Median), st.Min/1e6, st.Max/1e6)
}

func mechOf(r *Result, cfg string) string {
	for _, p := range r.Phases {
		if p.Config == cfg && p.Daemon != nil {
			return fmt.Sprintf("`%s` on `%s`", p.Daemon.Mechanism, p.Daemon.Scheduler)
		}
	}
	return "(not run)"
}

// colors per configuration in the plot.
var colors = map[string]string{CfgIdle: "#7f7f7f", CfgOriginal: "#d62728", CfgBFQ: "#ff7f0e",
	CfgStatic: "#9467bd", CfgDdiskqos: "#2ca02c", CfgPaper: "#1f77b4"}

// WriteSVG draws the median read time of every reader (Table 3 sizes, then
// Table 5 readers) per configuration, grouped bars on a log scale, with
// min–max whiskers.
func WriteSVG(w io.Writer, r *Result, s Summary) {
	type group struct {
		label string
		stats map[string]Stat
	}
	var gs []group
	for _, size := range r.Plan.Sizes {
		l := sizeLabel(size)
		gs = append(gs, group{"T3 " + l, s.Table3[l]})
	}
	for _, rd := range r.Plan.Table5 {
		gs = append(gs, group{"T5 " + rd.Label(), s.Table5[rd.Label()]})
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, g := range gs {
		for _, st := range g.stats {
			if st.N > 0 {
				lo, hi = math.Min(lo, st.Min), math.Max(hi, st.Max)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1e-3, 1
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi <= dlo {
		dhi = dlo + 1
	}
	const left, top, plotH, barW, gap = 70.0, 40.0, 320.0, 12.0, 22.0
	gw := barW*float64(len(columns)) + gap
	width := left + gw*float64(len(gs)) + 20
	height := top + plotH + 90
	y := func(v float64) float64 { return top + plotH - (math.Log10(v)-dlo)/(dhi-dlo)*plotH }
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%.0f" y="20" font-size="14">Read time per reader and configuration (median, min–max; log scale)</text>`+"\n", left)
	for d := dlo; d <= dhi; d++ {
		yy := y(math.Pow(10, d))
		fmt.Fprintf(w, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, width-20, yy, yy)
		fmt.Fprintf(w, `<text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, yy+4, ms(math.Pow(10, d)))
	}
	for i, g := range gs {
		x0 := left + float64(i)*gw + gap/2
		for j, c := range columns {
			st, ok := g.stats[c]
			if !ok || st.N == 0 {
				continue
			}
			x := x0 + float64(j)*barW
			fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				x, y(st.Median), barW-2, top+plotH-y(st.Median), colors[c], g.label, c, cell(st))
			cx := x + (barW-2)/2
			fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n", cx, cx, y(st.Min), y(st.Max))
		}
		fmt.Fprintf(w, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x0+barW*float64(len(columns))/2, top+plotH+16, g.label)
	}
	for j, c := range columns {
		x := left + float64(j)*100
		fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="12" height="12" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", x, top+plotH+40, colors[c], x+16, top+plotH+50, c)
	}
	fmt.Fprintln(w, "</svg>")
}
