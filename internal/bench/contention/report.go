package contention

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Spread is the median and range of one quantity over trials.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"` // trials it has a value for; 0: missing
}

func spread(xs []float64) Spread {
	var v []float64
	for _, x := range xs {
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return Spread{}
	}
	return Spread{Median: median(v), Min: slices.Min(v), Max: slices.Max(v), N: len(v)}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// ratio is a/b, NaN when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return math.NaN()
	}
	return a / b
}

// Row is one neighbour under one configuration, over the trials: the
// victims against idle, the neighbour against no QoS (Original).
type Row struct {
	Neighbour Neighbour `json:"neighbour"`
	Config    Config    `json:"config"`
	WebP50    Spread    `json:"web_p50_x_idle"`
	WebP99    Spread    `json:"web_p99_x_idle"`
	WebP999   Spread    `json:"web_p99_9_x_idle"`
	// WebRespP99 is the response time's p99 (from when each request was
	// due) ÷ idle's.
	WebRespP99 Spread   `json:"web_response_p99_x_idle"`
	Cold       []Spread `json:"cold_x_idle"` // per ColdSizes
	NBDuring   Spread   `json:"neighbour_during_x_noqos"`
	NBAfter1   Spread   `json:"neighbour_after_0_1s_x_noqos"`
	NBAfter2   Spread   `json:"neighbour_after_1_2s_x_noqos"`
	// Absolute medians.
	WebP99us   float64 `json:"web_p99_us"`
	DuringMiBs float64 `json:"neighbour_during_mib_s"`
	// Charged is the share of the device's bytes its cgroup was charged
	// while alone (warm-up): what v1 lets a cgroup control.
	Charged float64 `json:"charged"`
}

// Bar is one of the report's bars, judged on the median.
type Bar struct {
	What      string    `json:"what"`
	Neighbour Neighbour `json:"neighbour"`
	Config    Config    `json:"config"`
	Value     Spread    `json:"value"`
	Limit     float64   `json:"limit"`
	AtLeast   bool      `json:"at_least"` // the value must reach Limit (else stay within it)
	Met       bool      `json:"met"`
}

// Summary is the report's content.
type Summary struct {
	IdleWebP50us  Spread   `json:"idle_web_p50_us"`
	IdleWebP99us  Spread   `json:"idle_web_p99_us"`
	IdleWebP999us Spread   `json:"idle_web_p99_9_us"`
	IdleColdMs    []Spread `json:"idle_cold_ms"`
	// The same on BFQ, the reference of the configurations on BFQ.
	IdleBFQWebP50us  Spread `json:"idle_bfq_web_p50_us"`
	IdleBFQWebP99us  Spread `json:"idle_bfq_web_p99_us"`
	IdleBFQWebP999us Spread `json:"idle_bfq_web_p99_9_us"`
	Rows             []Row  `json:"rows"`
	Bars             []Bar  `json:"bars"`
	Missed           int    `json:"bars_missed"`
}

// nbRate is the neighbour's throughput in a window: its cgroup's counters,
// except for the buffered writer, whose writeback v1 does not charge to its
// cgroup, so the device's bytes are its throughput.
func nbRate(n Neighbour, w Window) float64 {
	if n == BufWrite {
		return w.Device
	}
	return w.Cgroup
}

// Summarize computes the report from the cells.
func Summarize(r *Result) Summary {
	var s Summary
	idle := map[[2]string]Cell{} // trial, idle configuration
	noqos := map[[2]string]Cell{}
	var ip50, ip99, ip999, bp50, bp99, bp999 []float64
	icold := make([][]float64, len(ColdSizes))
	for _, c := range r.Cells {
		switch c.Config {
		case IdleBFQ:
			idle[[2]string{fmt.Sprint(c.Trial), string(c.Config)}] = c
			bp50, bp99, bp999 = append(bp50, c.Web.P50), append(bp99, c.Web.P99), append(bp999, c.Web.P999)
		case Idle:
			idle[[2]string{fmt.Sprint(c.Trial), string(c.Config)}] = c
			ip50, ip99, ip999 = append(ip50, c.Web.P50), append(ip99, c.Web.P99), append(ip999, c.Web.P999)
			for i := range ColdSizes {
				if i < len(c.Cold) && len(c.Cold[i]) > 0 {
					icold[i] = append(icold[i], median(c.Cold[i]))
				}
			}
		case Original:
			noqos[[2]string{fmt.Sprint(c.Trial), string(c.Neighbour)}] = c
		}
	}
	s.IdleWebP50us, s.IdleWebP99us, s.IdleWebP999us = spread(ip50), spread(ip99), spread(ip999)
	s.IdleBFQWebP50us, s.IdleBFQWebP99us, s.IdleBFQWebP999us = spread(bp50), spread(bp99), spread(bp999)
	for i := range ColdSizes {
		s.IdleColdMs = append(s.IdleColdMs, spread(icold[i]))
	}
	for _, nb := range r.Plan.Neighbours {
		for _, cfg := range r.Plan.Configs {
			if cfg.idle() {
				continue
			}
			row := Row{Neighbour: nb, Config: cfg}
			var p50, p99, p999, resp99, dur, a1, a2, abs99, absDur, charged []float64
			cold := make([][]float64, len(ColdSizes))
			for _, c := range r.Cells {
				if c.Config != cfg || c.Neighbour != nb {
					continue
				}
				id, ok := idle[[2]string{fmt.Sprint(c.Trial), string(cfg.Reference())}]
				if ok {
					p50 = append(p50, ratio(c.Web.P50, id.Web.P50))
					p99 = append(p99, ratio(c.Web.P99, id.Web.P99))
					p999 = append(p999, ratio(c.Web.P999, id.Web.P999))
					resp99 = append(resp99, ratio(c.WebResponse.P99, id.WebResponse.P99))
					for i := range ColdSizes {
						if i < len(c.Cold) && len(c.Cold[i]) > 0 && i < len(id.Cold) && len(id.Cold[i]) > 0 {
							cold[i] = append(cold[i], ratio(median(c.Cold[i]), median(id.Cold[i])))
						}
					}
				}
				abs99 = append(abs99, c.Web.P99)
				if c.NB != nil {
					absDur = append(absDur, nbRate(nb, c.NB.During)/(1<<20))
					charged = append(charged, ratio(c.NB.Warm.Cgroup, c.NB.Warm.Device))
					if o, ok := noqos[[2]string{fmt.Sprint(c.Trial), string(nb)}]; ok && o.NB != nil {
						dur = append(dur, ratio(nbRate(nb, c.NB.During), nbRate(nb, o.NB.During)))
						a1 = append(a1, ratio(nbRate(nb, c.NB.After1), nbRate(nb, o.NB.After1)))
						a2 = append(a2, ratio(nbRate(nb, c.NB.After2), nbRate(nb, o.NB.After2)))
					}
				}
			}
			row.WebP50, row.WebP99, row.WebP999, row.WebRespP99 = spread(p50), spread(p99), spread(p999), spread(resp99)
			for i := range ColdSizes {
				row.Cold = append(row.Cold, spread(cold[i]))
			}
			row.NBDuring, row.NBAfter1, row.NBAfter2 = spread(dur), spread(a1), spread(a2)
			row.WebP99us, row.DuringMiBs, row.Charged = spread(abs99).Median, spread(absDur).Median, spread(charged).Median
			s.Rows = append(s.Rows, row)
		}
	}
	for _, row := range s.Rows {
		add := func(what string, v Spread, limit float64, atLeast bool) {
			b := Bar{What: what, Neighbour: row.Neighbour, Config: row.Config, Value: v, Limit: limit, AtLeast: atLeast}
			b.Met = v.N > 0 && (atLeast && v.Median >= limit || !atLeast && v.Median <= limit)
			if !b.Met {
				s.Missed++
			}
			s.Bars = append(s.Bars, b)
		}
		switch row.Config {
		case Original:
			add("contention exists: web p99 ÷ idle", row.WebP99, 10, true)
		case DDiskQoS, DDiskQoSBFQ:
			add("web p99 ÷ idle", row.WebP99, 3, false)
			add("web p50 ÷ idle", row.WebP50, 1.5, false)
			for i, sz := range ColdSizes {
				add(fmt.Sprintf("cold %d MiB ÷ idle", sz>>20), row.Cold[i], 1.5, false)
			}
			add("neighbour during ÷ no QoS", row.NBDuring, 0.5, true)
			add("neighbour 1–2 s after ÷ no QoS", row.NBAfter2, 0.95, true)
		}
	}
	return s
}

// fmtX formats a ratio spread: "12.3× (10.1–14.0)".
func fmtX(v Spread) string {
	if v.N == 0 {
		return "—"
	}
	f := func(x float64) string {
		switch {
		case x >= 100:
			return fmt.Sprintf("%.0f", x)
		case x >= 10:
			return fmt.Sprintf("%.1f", x)
		}
		return fmt.Sprintf("%.2f", x)
	}
	if v.N == 1 || v.Min == v.Max {
		return f(v.Median) + "×"
	}
	return fmt.Sprintf("%s× (%s–%s)", f(v.Median), f(v.Min), f(v.Max))
}

func fmtPct(v Spread) string {
	if v.N == 0 {
		return "—"
	}
	if v.N == 1 || v.Min == v.Max {
		return fmt.Sprintf("%.0f %%", v.Median*100)
	}
	return fmt.Sprintf("%.0f %% (%.0f–%.0f)", v.Median*100, v.Min*100, v.Max*100)
}

func fmtAbs(v Spread, unit string) string {
	if v.N == 0 {
		return "—"
	}
	if v.N == 1 || v.Min == v.Max {
		return fmt.Sprintf("%.0f %s", v.Median, unit)
	}
	return fmt.Sprintf("%.0f %s (%.0f–%.0f)", v.Median, unit, v.Min, v.Max)
}

// WriteMarkdown writes the report; plot names the SVG beside it ("" for none).
func WriteMarkdown(w io.Writer, r *Result, s Summary, plot string) {
	p := r.Plan
	v2 := r.Cgroup == "v2"
	hier, counters := "cgroup v1 blkio", "blkio.throttle.io_service_bytes"
	if v2 {
		hier, counters = "cgroup v2 (io controller", "io.stat rbytes + wbytes"
		if r.Memory {
			hier += " and memory controller"
		}
		hier += " on for the run's cgroups)"
		fmt.Fprintf(w, "# Contention on cgroup v2: noisy neighbours against small readers\n\n")
	} else {
		fmt.Fprintf(w, "# Contention: noisy neighbours against small readers\n\n")
	}
	fmt.Fprintf(w, "Regenerate with `%s` (needs root; see `ddiskqos bench contention --help`).\n\n", r.Command)
	fmt.Fprintf(w, "Built from `%s`, measured %s on Linux %s, %d CPUs, %s, a loop device (%s, direct I/O, ext4) over a file in %s; default scheduler `%s`. "+
		"%d trial(s), configurations interleaved within each trial; every cell shows the median over trials and, with more than one, the range.\n\n",
		r.Build, r.Start.UTC().Format(time.DateOnly), r.Kernel, r.CPUs, hier, r.Device, backingDir(r.Backing), r.DefaultScheduler, p.Trials)
	if r.TestVM {
		fmt.Fprintf(w, "**Run inside the test VM (qemu, software emulation):** every latency and throughput here is the emulator's; "+
			"absolute figures mean nothing, only ratios within this run do (each configuration against idle and no QoS of the same trial).\n\n")
	}
	if r.IOCost != nil {
		fmt.Fprintf(w, "iocost (the `ddiskqos` configuration only), calibrated by `ddiskqos calibrate`'s patterns (%s each) on %s, "+
			"a loop device over a fully written %d MiB file beside the volume's:\n\n```\nio.cost.model: %s\nio.cost.qos:   %s\n```\n\n",
			r.IOCost.PatternTime, r.IOCost.Twin, TwinMiB, r.IOCost.Model, r.IOCost.QoS)
		fmt.Fprintf(w, "| pattern | block | depth | MiB/s | IOPS | p50 | p99 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, m := range r.IOCost.Measurements {
			fmt.Fprintf(w, "| %s | %d | %d | %.1f | %.0f | %.0f µs | %.0f µs |\n", m.Pattern, m.BlockSize, m.IODepth, m.BytesPerSec/(1<<20), m.IOPS, m.Latency.P50, m.Latency.P99)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "The host's load average (1 min) was %s at the start and %s at the end; the bench and its workloads ran at nice %d. "+
		"On a busy host, CPU waits add to every latency here: compare only within one run.\n\n", r.LoadStart, r.LoadEnd, r.Nice)
	fmt.Fprintf(w, "Each neighbour runs alone in a cgroup of its own; after %s of warm-up the victims start, each in a new cgroup: "+
		"a web-server-like reader (4k O_DIRECT random reads at %.0f requests/s for %s; its latency is each request's service time, "+
		"from its issue, as fio reports it; its response time counts from when the request was due, so one stall counts against every request behind it), "+
		"then %d cold read(s) each of a 1 MiB and a 10 MiB file (page cache of the file dropped first). The neighbour keeps running %s after them. "+
		"Victims are compared with the same victims alone on the same scheduler (idle, or idle-bfq for the BFQ configurations) in the same trial; the neighbour's throughput (its cgroup's "+
		"%s sampled every %s) with no QoS (original).\n\n",
		p.Warmup, p.WebIOPS, p.Web, p.ColdReads, p.After, counters, p.SampleEvery)
	if plot != "" {
		fmt.Fprintf(w, "![victim p99 and neighbour throughput per configuration](%s)\n\n", plot)
	}
	fmt.Fprintf(w, "Idle: web p50 %s, p99 %s, p99.9 %s", fmtAbs(s.IdleWebP50us, "µs"), fmtAbs(s.IdleWebP99us, "µs"), fmtAbs(s.IdleWebP999us, "µs"))
	for i, sz := range ColdSizes {
		if i < len(s.IdleColdMs) {
			v := s.IdleColdMs[i]
			fmt.Fprintf(w, "; cold %d MiB %.1f ms", sz>>20, v.Median)
		}
	}
	fmt.Fprintf(w, ".\n")
	fmt.Fprintf(w, "Idle on BFQ (the reference of bfq, static and ddiskqos-bfq): web p50 %s, p99 %s, p99.9 %s.\n\n",
		fmtAbs(s.IdleBFQWebP50us, "µs"), fmtAbs(s.IdleBFQWebP99us, "µs"), fmtAbs(s.IdleBFQWebP999us, "µs"))
	for _, nb := range p.Neighbours {
		fmt.Fprintf(w, "## Neighbour: %s (%s)\n\n", nb, nb.Describe())
		fmt.Fprintf(w, "| configuration | web p50 ÷ idle | web p99 ÷ idle | web p99.9 ÷ idle | web p99 | web response p99 ÷ idle | cold 1 MiB ÷ idle | cold 10 MiB ÷ idle | neighbour during ÷ no QoS | after 0–1 s | after 1–2 s | neighbour during |\n")
		fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, row := range s.Rows {
			if row.Neighbour != nb {
				continue
			}
			cold := [2]string{"—", "—"}
			for i := range min(2, len(row.Cold)) {
				cold[i] = fmtX(row.Cold[i])
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %.0f µs | %s | %s | %s | %s | %s | %s | %.0f MiB/s |\n",
				row.Config, fmtX(row.WebP50), fmtX(row.WebP99), fmtX(row.WebP999), row.WebP99us, fmtX(row.WebRespP99), cold[0], cold[1],
				fmtPct(row.NBDuring), fmtPct(row.NBAfter1), fmtPct(row.NBAfter2), row.DuringMiBs)
		}
		fmt.Fprintln(w)
	}

	fmt.Fprintf(w, "## The bars\n\n")
	fmt.Fprintf(w, "Judged on the median. Idle is `idle` for the default scheduler and `idle-bfq` for ddiskqos-bfq; no QoS is `original`.\n\n")
	fmt.Fprintf(w, "| neighbour | configuration | bar | measured | verdict |\n| --- | --- | --- | --- | --- |\n")
	for _, b := range s.Bars {
		op := "≤"
		if b.AtLeast {
			op = "≥"
		}
		val, lim := fmtX(b.Value), fmt.Sprintf("%g×", b.Limit)
		if strings.HasPrefix(b.What, "neighbour") {
			val, lim = fmtPct(b.Value), fmt.Sprintf("%.0f %%", b.Limit*100)
		}
		verdict := "met"
		if !b.Met {
			verdict = "**missed**"
		}
		fmt.Fprintf(w, "| %s | %s | %s %s %s | %s | %s |\n", b.Neighbour, b.Config, b.What, op, lim, val, verdict)
	}
	fmt.Fprintf(w, "\n%d of %d bars missed.\n\n", s.Missed, len(s.Bars))

	if v2 {
		writeChargedV2(w, r, s)
	} else {
		writeChargedV1(w, r, s)
	}

	fmt.Fprintf(w, "## Configurations\n\n")
	for _, c := range p.Configs {
		fmt.Fprintf(w, "- `%s`: %s\n", c, c.Describe(r.Cgroup))
	}
	fmt.Fprintln(w)
}

// backingDir is the directory the volume's backing file was made in (its
// own temporary directory's parent).
func backingDir(backing string) string {
	if backing == "" {
		return "/var/tmp"
	}
	return filepath.Dir(filepath.Dir(backing))
}

// writeChargedV2 is the share of the device's bytes charged to the
// neighbour's cgroup on v2.
func writeChargedV2(w io.Writer, r *Result, s Summary) {
	fmt.Fprintf(w, "## What cgroup v2 charges to the neighbour's cgroup\n\n")
	fmt.Fprintf(w, "The share of the device's bytes charged to the neighbour's own cgroup (io.stat) while it ran alone (second half of the warm-up, `original`):\n\n")
	fmt.Fprintf(w, "| neighbour | charged to its cgroup |\n| --- | --- |\n")
	for _, row := range s.Rows {
		if row.Config == Original {
			fmt.Fprintf(w, "| %s | %.0f %% |\n", row.Neighbour, row.Charged*100)
		}
	}
	if r.Memory {
		fmt.Fprintf(w, "\nWith the memory controller on for the run's cgroups, v2 charges writeback to the cgroup that cached the pages, "+
			"also when the kernel's flusher threads issue it: the buffered writer rewrites one file from a new cgroup each cell, "+
			"so while the file stays cached only the cell that wrote it first is charged; later cells' writeback goes to the first cell's cgroup, or its parent once it is removed "+
			"(docs/mechanisms.md).\n\n")
	} else {
		fmt.Fprintf(w, "\nThe memory controller was not available for the run's cgroups: writeback the flusher threads issue is charged to the root cgroup, as on v1.\n\n")
	}
}

// writeChargedV1 is the share of the device's bytes charged to the
// neighbour's cgroup on v1, and why a buffered writer can escape it.
func writeChargedV1(w io.Writer, r *Result, s Summary) {
	fmt.Fprintf(w, "## What cgroup v1 lets a cgroup control\n\n")
	fmt.Fprintf(w, "The share of the device's bytes charged to the neighbour's own cgroup while it ran alone (second half of the warm-up, `original`); "+
		"what is not charged to it no weight or throttle on its cgroup can reach:\n\n")
	fmt.Fprintf(w, "| neighbour | charged to its cgroup | so on v1 |\n| --- | --- | --- |\n")
	for _, row := range s.Rows {
		if row.Config != Original {
			continue
		}
		verdict := "controllable: its I/O is its cgroup's"
		switch {
		case row.Neighbour == BufWrite && row.Charged >= 0.9:
			verdict = fmt.Sprintf("controllable here: its fdatasync every %d MiB submits the writeback from its own context, which v1 charges to its cgroup", r.Plan.FsyncEvery>>20)
		case row.Charged < 0.9:
			verdict = "partly beyond control: the kernel's flusher threads write its dirty pages back, charged to the root cgroup (cgroup writeback needs v2)"
		}
		fmt.Fprintf(w, "| %s | %.0f %% | %s |\n", row.Neighbour, row.Charged*100, verdict)
	}
	fmt.Fprintf(w, "\nOn v1, writeback that the kernel's flusher threads issue (dirty pages that expire or pass the background "+
		"threshold before the writer syncs them) is charged to the root cgroup, not to the writer's; only what the writer's own "+
		"fsync or fdatasync submits is charged to it. A buffered writer that syncs rarely or never is beyond any v1 cgroup "+
		"control. The buffered writer's throughput columns use the device's bytes, so that uncharged writeback is not hidden.\n\n")
}

// configColors are the SVG's bar colours, in Configs order.
var configColors = map[Config]string{
	Original: "#d62728", BFQ: "#9467bd", Static: "#8c564b", ThrottleFixed: "#7f7f7f",
	DDiskQoS: "#1f77b4", DDiskQoSBFQ: "#17becf",
}

// WriteSVG draws two charts: the web victim's p99 ÷ idle (log scale) and
// the neighbour's throughput while the victims ran ÷ no QoS, per
// neighbour and configuration.
func WriteSVG(w io.Writer, r *Result, s Summary) {
	var cfgs []Config
	for _, c := range r.Plan.Configs {
		if !c.idle() {
			cfgs = append(cfgs, c)
		}
	}
	nbs := r.Plan.Neighbours
	const left, top, chartH, gap, barW = 60.0, 40.0, 220.0, 60.0, 14.0
	groupW := barW*float64(len(cfgs)) + 30
	width := max(left+groupW*float64(len(nbs))+20, left+110*float64(len(cfgs)))
	height := top + 2*chartH + 2*gap + 40
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	find := func(nb Neighbour, c Config) Row {
		for _, row := range s.Rows {
			if row.Neighbour == nb && row.Config == c {
				return row
			}
		}
		return Row{}
	}
	chart := func(y0 float64, title string, val func(Row) Spread, scale func(float64) float64, ticks []float64, tickLabel func(float64) string, ref float64) {
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f" font-size="13">%s</text>`+"\n", left, y0-10, title)
		for _, t := range ticks {
			y := y0 + chartH - scale(t)*chartH
			fmt.Fprintf(w, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">%s</text>`+"\n",
				left, width-20, y, y, left-4, y+4, tickLabel(t))
		}
		yr := y0 + chartH - scale(ref)*chartH
		fmt.Fprintf(w, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="black" stroke-dasharray="4 3"/>`+"\n", left, width-20, yr, yr)
		for i, nb := range nbs {
			x0 := left + float64(i)*groupW + 15
			for j, c := range cfgs {
				v := val(find(nb, c))
				if v.N == 0 {
					continue
				}
				h := math.Max(1, scale(v.Median)*chartH)
				x := x0 + float64(j)*barW
				fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s, %s: %.3g</title></rect>`+"\n",
					x, y0+chartH-h, barW-2, h, configColors[c], nb, c, v.Median)
				if v.N > 1 {
					ylo, yhi := y0+chartH-scale(v.Min)*chartH, y0+chartH-scale(v.Max)*chartH
					fmt.Fprintf(w, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="black"/>`+"\n", x+barW/2-1, x+barW/2-1, ylo, yhi)
				}
			}
			fmt.Fprintf(w, `<text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", x0+barW*float64(len(cfgs))/2, y0+chartH+14, nb)
		}
	}
	logScale := func(v float64) float64 { // 0.5× .. 1000×
		v = math.Min(math.Max(v, 0.5), 1000)
		return (math.Log10(v) - math.Log10(0.5)) / (3 - math.Log10(0.5))
	}
	chart(top, "web victim p99 ÷ idle (log scale; dashed: the bar, 3×)", func(r Row) Spread { return r.WebP99 }, logScale,
		[]float64{1, 3, 10, 100, 1000}, func(t float64) string { return fmt.Sprintf("%g×", t) }, 3)
	linScale := func(v float64) float64 { return math.Min(math.Max(v, 0), 1.5) / 1.5 }
	chart(top+chartH+gap, "neighbour throughput while the victims ran ÷ no QoS (dashed: the bar, 50 %)", func(r Row) Spread { return r.NBDuring }, linScale,
		[]float64{0, 0.5, 1, 1.5}, func(t float64) string { return fmt.Sprintf("%.0f %%", t*100) }, 0.5)
	// Legend.
	y := height - 20
	for j, c := range cfgs {
		x := left + float64(j)*110
		fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/><text x="%.0f" y="%.0f">%s</text>`+"\n", x, y-9, configColors[c], x+14, y, c)
	}
	fmt.Fprintln(w, "</svg>")
}
