package contention

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// HostRow is one configuration of the host scenario over the trials: the
// victims against idle, the streamer against no QoS (Original), each
// ratio taken within a trial.
type HostRow struct {
	Config    Config `json:"config"`
	WebP50    Spread `json:"web_p50_x_idle"`
	WebP99    Spread `json:"web_p99_x_idle"`
	WebP999   Spread `json:"web_p99_9_x_idle"`
	LightP99  Spread `json:"light_p99_x_idle"`
	LightP999 Spread `json:"light_p99_9_x_idle"`
	// The same from each victim's second second on (HostCell.WebSettled),
	// ÷ idle's same.
	WebP99Settled    Spread   `json:"web_p99_settled_x_idle"`
	WebP999Settled   Spread   `json:"web_p99_9_settled_x_idle"`
	LightP99Settled  Spread   `json:"light_p99_settled_x_idle"`
	LightP999Settled Spread   `json:"light_p99_9_settled_x_idle"`
	Cold             []Spread `json:"cold_x_idle"` // per ColdSizes
	// During is the streamer's throughput while the victims ran ÷ no
	// QoS's; After from 1 s after they ended to the end of the run's
	// After ÷ no QoS's same window.
	During Spread `json:"streamer_during_x_noqos"`
	After  Spread `json:"streamer_after_x_noqos"`
	// Absolute medians.
	WebP99us   float64 `json:"web_p99_us"`
	LightP99us float64 `json:"light_p99_us"`
	DuringMiBs float64 `json:"streamer_during_mib_s"`
	CapMiBs    float64 `json:"cap_mib_s,omitempty"`
}

// HostBar is one of the report's bars for the host scenario, judged on the
// median over trials. Goal bars are past the bar: reported, not counted.
type HostBar struct {
	What    string  `json:"what"`
	Config  Config  `json:"config"`
	Value   float64 `json:"value"`
	Limit   float64 `json:"limit"`
	AtLeast bool    `json:"at_least"`
	Unit    string  `json:"unit"` // "x" (ratio), "%" (share), "" (count)
	// Measured is false when the run has no value for it (Value is 0).
	Measured bool   `json:"measured"`
	Met      bool   `json:"met"`
	Goal     bool   `json:"goal,omitempty"`
	Note     string `json:"note,omitempty"`
}

// HostSummary is the host report's content.
type HostSummary struct {
	UnloadedP99us  float64   `json:"unloaded_p99_us"`
	IdleWebP50us   Spread    `json:"idle_web_p50_us"`
	IdleWebP99us   Spread    `json:"idle_web_p99_us"`
	IdleWebP999us  Spread    `json:"idle_web_p99_9_us"`
	IdleLightP99us Spread    `json:"idle_light_p99_us"`
	IdleColdMs     []Spread  `json:"idle_cold_ms"`
	Rows           []HostRow `json:"rows"`
	// Frontiers are web and light, when the run had ddiskqos and caps.
	Frontiers []FrontierVerdict `json:"frontiers,omitempty"`
	Bars      []HostBar         `json:"bars"`
	Missed    int               `json:"bars_missed"`
	// NotQuiet says why the host was not quiet (empty: it was).
	NotQuiet []string `json:"not_quiet,omitempty"`
	// IdleNote: idle's web p99 far above the unloaded device's under a
	// scheduler other than the device's default (BFQ idles for each
	// group's next request, so the victims wait on one another with no
	// streamer at all): the scheduler's physics, said, not the host's
	// noise (the load average still is the quiet check).
	IdleNote string `json:"idle_note,omitempty"`
}

// SummarizeHost computes the host report from the cells.
func SummarizeHost(r *HostResult) HostSummary {
	s := HostSummary{UnloadedP99us: r.Unloaded.P99}
	idle, noqos := map[int]HostCell{}, map[int]HostCell{}
	var ip50, ip99, ip999, il99 []float64
	icold := make([][]float64, len(ColdSizes))
	for _, c := range r.Cells {
		switch c.Config {
		case Idle:
			idle[c.Trial] = c
			ip50, ip99, ip999, il99 = append(ip50, c.Web.P50), append(ip99, c.Web.P99), append(ip999, c.Web.P999), append(il99, c.Light.P99)
			for i := range ColdSizes {
				if i < len(c.Cold) && len(c.Cold[i]) > 0 {
					icold[i] = append(icold[i], median(c.Cold[i]))
				}
			}
		case Original:
			noqos[c.Trial] = c
		}
	}
	s.IdleWebP50us, s.IdleWebP99us, s.IdleWebP999us, s.IdleLightP99us = spread(ip50), spread(ip99), spread(ip999), spread(il99)
	for i := range ColdSizes {
		s.IdleColdMs = append(s.IdleColdMs, spread(icold[i]))
	}
	if why := LoadTooHigh(r.LoadStart, r.Plan.MaxLoad); why != "" {
		s.NotQuiet = append(s.NotQuiet, why)
	}
	if s.IdleWebP99us.N > 0 && s.IdleWebP99us.Median > r.Plan.QuietFactor*r.Unloaded.P99 {
		why := fmt.Sprintf("idle web p99 %.0f µs, above %g× the unloaded device's p99 %.0f µs measured at the start",
			s.IdleWebP99us.Median, r.Plan.QuietFactor, r.Unloaded.P99)
		if r.Scheduler != "" && r.Scheduler != r.DefaultScheduler {
			s.IdleNote = fmt.Sprintf("%s (%.1f×), under the scheduler %s (the device's default is %s): the victims slow one another with no streamer at all; "+
				"their ratios below are to this idle, and the absolute figures are beside them", why, s.IdleWebP99us.Median/r.Unloaded.P99, r.Scheduler, r.DefaultScheduler)
		} else {
			s.NotQuiet = append(s.NotQuiet, why)
		}
	}

	for _, cfg := range r.Plan.Configs {
		if cfg == Idle {
			continue
		}
		row := HostRow{Config: cfg}
		var p50, p99, p999, l99, l999, sp99, sp999, sl99, sl999, dur, aft, w99, lt99, mibs, caps []float64
		cold := make([][]float64, len(ColdSizes))
		for _, c := range r.Cells {
			if c.Config != cfg {
				continue
			}
			if id, ok := idle[c.Trial]; ok {
				p50 = append(p50, ratio(c.Web.P50, id.Web.P50))
				p99 = append(p99, ratio(c.Web.P99, id.Web.P99))
				p999 = append(p999, ratio(c.Web.P999, id.Web.P999))
				l99 = append(l99, ratio(c.Light.P99, id.Light.P99))
				l999 = append(l999, ratio(c.Light.P999, id.Light.P999))
				if c.WebSettled.P99 > 0 && id.WebSettled.P99 > 0 {
					sp99 = append(sp99, ratio(c.WebSettled.P99, id.WebSettled.P99))
					sp999 = append(sp999, ratio(c.WebSettled.P999, id.WebSettled.P999))
				}
				if c.LightSettled.P99 > 0 && id.LightSettled.P99 > 0 {
					sl99 = append(sl99, ratio(c.LightSettled.P99, id.LightSettled.P99))
					sl999 = append(sl999, ratio(c.LightSettled.P999, id.LightSettled.P999))
				}
				for i := range ColdSizes {
					if i < len(c.Cold) && len(c.Cold[i]) > 0 && i < len(id.Cold) && len(id.Cold[i]) > 0 {
						cold[i] = append(cold[i], ratio(median(c.Cold[i]), median(id.Cold[i])))
					}
				}
			}
			w99, lt99 = append(w99, c.Web.P99), append(lt99, c.Light.P99)
			if c.Streamer != nil {
				mibs = append(mibs, c.Streamer.During.Cgroup/(1<<20))
				if c.Streamer.Cap > 0 {
					caps = append(caps, float64(c.Streamer.Cap)/(1<<20))
				}
				if o, ok := noqos[c.Trial]; ok && o.Streamer != nil {
					dur = append(dur, ratio(c.Streamer.During.Cgroup, o.Streamer.During.Cgroup))
					aft = append(aft, ratio(c.Streamer.AfterRest.Cgroup, o.Streamer.AfterRest.Cgroup))
				}
			}
		}
		row.WebP50, row.WebP99, row.WebP999, row.LightP99, row.LightP999 = spread(p50), spread(p99), spread(p999), spread(l99), spread(l999)
		row.WebP99Settled, row.WebP999Settled, row.LightP99Settled, row.LightP999Settled = spread(sp99), spread(sp999), spread(sl99), spread(sl999)
		for i := range ColdSizes {
			row.Cold = append(row.Cold, spread(cold[i]))
		}
		row.During, row.After = spread(dur), spread(aft)
		row.WebP99us, row.LightP99us, row.DuringMiBs, row.CapMiBs = spread(w99).Median, spread(lt99).Median, spread(mibs).Median, spread(caps).Median
		if math.IsNaN(row.CapMiBs) {
			row.CapMiBs = 0
		}
		s.Rows = append(s.Rows, row)
	}

	rowOf := func(c Config) (HostRow, bool) {
		for _, x := range s.Rows {
			if x.Config == c {
				return x, true
			}
		}
		return HostRow{}, false
	}
	add := func(b HostBar, v Spread) {
		b.Value, b.Measured = v.Median, v.N > 0
		b.Met = v.N > 0 && (b.AtLeast && v.Median >= b.Limit || !b.AtLeast && v.Median <= b.Limit)
		if !b.Met && !b.Goal {
			s.Missed++
		}
		s.Bars = append(s.Bars, b)
	}
	o, haveO := rowOf(Original)
	if haveO && !r.Plan.Moderate() {
		add(HostBar{What: "contention exists: web p99 ÷ idle", Config: Original, Limit: 10, AtLeast: true, Unit: "x"}, o.WebP99)
	}
	if haveO && r.Plan.Moderate() {
		add(HostBar{What: "a moderate neighbour: no QoS keeps web p99 within 3× idle", Config: Original, Limit: 3, Unit: "x"}, o.WebP99)
	}
	d, ok := rowOf(DDiskQoS)
	if !ok {
		return s
	}
	if r.Plan.Moderate() {
		// No harm: the neighbour keeps its throughput and the victims are
		// no worse than without the daemon (within a quarter: the noise of
		// one run's p99 between cells).
		add(HostBar{What: "no harm: streamer during ÷ no QoS", Config: DDiskQoS, Limit: 0.90, AtLeast: true, Unit: "%"}, d.During)
		if haveO {
			add(HostBar{What: "no harm: web p99 ÷ idle at most 1.25× no QoS's", Config: DDiskQoS, Limit: 1.25 * o.WebP99.Median, Unit: "x"}, d.WebP99)
			add(HostBar{What: "no harm: light p99 ÷ idle at most 1.25× no QoS's", Config: DDiskQoS, Limit: 1.25 * o.LightP99.Median, Unit: "x"}, d.LightP99)
		}
	} else {
		add(HostBar{What: "web p99 ÷ idle", Config: DDiskQoS, Limit: 3, Unit: "x"}, d.WebP99)
		add(HostBar{What: "light p99 ÷ idle", Config: DDiskQoS, Limit: 3, Unit: "x"}, d.LightP99)
		add(HostBar{What: "web p99.9 ÷ idle", Config: DDiskQoS, Limit: 10, Unit: "x"}, d.WebP999)
		add(HostBar{What: "light p99.9 ÷ idle", Config: DDiskQoS, Limit: 10, Unit: "x"}, d.LightP999)
		add(HostBar{What: "streamer during ÷ no QoS", Config: DDiskQoS, Limit: 0.10, AtLeast: true, Unit: "%"}, d.During)
	}
	add(HostBar{What: "streamer from 1 s after ÷ no QoS", Config: DDiskQoS, Limit: 0.90, AtLeast: true, Unit: "%"}, d.After)
	up, n := 0.0, 0.0
	for _, c := range r.Cells {
		if c.Config == DDiskQoS {
			n++
			if c.Daemon != nil && c.Daemon.Ticks > 0 && len(c.Daemon.Errors) == 0 {
				up++
			}
		}
	}
	add(HostBar{What: "the daemon stays up: cells with it ticking and no error", Config: DDiskQoS, Limit: n, AtLeast: true}, Spread{Median: up, Min: up, Max: up, N: 1})

	// Not dominated: every peer of the run (no QoS, static and re-armed
	// caps, BFQ), not ddiskqos's own capping mode.
	var webPeers, lightPeers []FrontierPoint
	for _, x := range s.Rows {
		if x.Config == DDiskQoS || x.Config == DDiskQoSCapping || x.Config.idle() || x.During.N == 0 {
			continue
		}
		webPeers = append(webPeers, FrontierPoint{Config: x.Config, Share: x.During.Median, P99: x.WebP99.Median})
		lightPeers = append(lightPeers, FrontierPoint{Config: x.Config, Share: x.During.Median, P99: x.LightP99.Median})
	}
	if d.During.N > 0 && len(webPeers) > 0 {
		for _, v := range []struct {
			victim string
			p99    float64
			peers  []FrontierPoint
		}{{"web", d.WebP99.Median, webPeers}, {"light", d.LightP99.Median, lightPeers}} {
			doms := Dominators(FrontierPoint{Config: DDiskQoS, Share: d.During.Median, P99: v.p99}, v.peers)
			b := HostBar{What: fmt.Sprintf("not dominated: peers giving both a lower %s p99 ÷ idle and a larger share", v.victim),
				Config: DDiskQoS, Value: float64(len(doms)), Measured: true, Met: len(doms) == 0}
			var names []string
			for _, p := range doms {
				names = append(names, fmt.Sprintf("%s (%.0f %%, %s)", p.Config, p.Share*100, fmtUnit(p.P99, "x")))
			}
			b.Note = "peers dominating: none"
			if len(names) > 0 {
				b.Note = "peers dominating: " + strings.Join(names, ", ")
			}
			if !b.Met {
				s.Missed++
			}
			s.Bars = append(s.Bars, b)
		}
	}

	var web, light []FrontierPoint
	for _, x := range s.Rows {
		if _, ok := x.Config.CapShare(); ok && x.During.N > 0 {
			web = append(web, FrontierPoint{Config: x.Config, Share: x.During.Median, P99: x.WebP99.Median})
			light = append(light, FrontierPoint{Config: x.Config, Share: x.During.Median, P99: x.LightP99.Median})
		}
	}
	if len(web) > 0 && d.During.N > 0 {
		for _, f := range []FrontierVerdict{
			Frontier("web", FrontierPoint{Config: DDiskQoS, Share: d.During.Median, P99: d.WebP99.Median}, web),
			Frontier("light", FrontierPoint{Config: DDiskQoS, Share: d.During.Median, P99: d.LightP99.Median}, light),
		} {
			s.Frontiers = append(s.Frontiers, f)
			// Past the bar: a static cap interpolated at ddiskqos's share
			// is no peer the run measured, so this is a goal.
			b := HostBar{What: fmt.Sprintf("goal past the bar: beyond the static-cap frontier: %s p99 ÷ idle below the frontier's at the streamer's share", f.Victim),
				Config: DDiskQoS, Value: f.DDiskQoS.P99, Unit: "x", Measured: f.Defined, Met: f.Beyond, Note: f.Between, Goal: true}
			if f.Defined {
				b.Limit = f.Frontier
			}
			s.Bars = append(s.Bars, b)
		}
	}
	if r.Plan.Moderate() {
		return s
	}
	add(HostBar{What: "goal past the bar: streamer during ÷ no QoS", Config: DDiskQoS, Limit: 0.50, AtLeast: true, Unit: "%", Goal: true}, d.During)
	return s
}

func fmtUnit(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "—"
	case unit == "%":
		return fmt.Sprintf("%.0f %%", v*100)
	case unit == "x":
		return fmtX(Spread{Median: v, Min: v, Max: v, N: 1})
	}
	return fmt.Sprintf("%g", v)
}

// fmtLimit formats a bar's limit: "3×", "10 %".
func fmtLimit(v float64, unit string) string {
	switch unit {
	case "%":
		return fmt.Sprintf("%g %%", v*100)
	case "x":
		return strconv.FormatFloat(v, 'g', 3, 64) + "×"
	}
	return fmt.Sprintf("%g", v)
}

// WriteHostMarkdown writes the host scenario's report; plot names the SVG
// beside it ("" for none).
func WriteHostMarkdown(w io.Writer, r *HostResult, s HostSummary, plot string) {
	writeHostReport(w, r, s, plot, "# Contention on a host: a streamer that never stops, a web service, eight light tenants", "##")
}

// writeHostReport is WriteHostMarkdown under the heading title, its own
// headings at level sub ("##"; "###" as a section of the device matrix).
func writeHostReport(w io.Writer, r *HostResult, s HostSummary, plot, title, sub string) {
	p := r.Plan
	knob := "blkio.throttle.read_bps_device"
	if r.Cgroup == "v2" {
		knob = "io.max rbps"
	}
	fmt.Fprintf(w, "%s\n\n", title)
	fmt.Fprintf(w, "Regenerate with `%s` (needs root; see `ddiskqos bench contention --help`).\n\n", r.Command)
	rig := fmt.Sprintf("a loop device (%s, direct I/O, ext4) over a file in %s", r.Device, backingDir(r.Backing))
	if p.NoLoop {
		rig = fmt.Sprintf("no loop device: the files in a new directory on the host's own disk %s as it is, "+
			"shared with the rest of the host (only the bench's own cgroups capped, its scheduler untouched)", r.Device)
	}
	fmt.Fprintf(w, "Built from `%s`, measured %s (%s to %s UTC) on Linux %s, %d CPUs, cgroup %s, %s; "+
		"scheduler `%s` in every cell (the device's default is `%s`). %d trial(s), configurations interleaved within each trial; every cell shows the median over trials and, with more than one, the range.\n\n",
		r.Build, r.Start.UTC().Format(time.DateOnly), r.Start.UTC().Format("15:04"), r.End.UTC().Format("15:04"),
		r.Kernel, r.CPUs, r.Cgroup, rig, r.Scheduler, r.DefaultScheduler, p.Trials)
	if r.Below != "" || p.Device != "" {
		what := "the backing file's filesystem"
		if p.NoLoop {
			what = "the files' filesystem"
		}
		fmt.Fprintf(w, "Device class: %s; %s: %s.\n\n", cmpOr(p.Device, "not named"), what, cmpOr(r.Below, "unknown"))
	}
	if r.TestVM {
		fmt.Fprintf(w, "**Run inside the test VM (qemu, software emulation):** absolute figures are the emulator's; only ratios within this run mean anything.\n\n")
	}
	if len(s.NotQuiet) > 0 {
		fmt.Fprintf(w, "**Not a quiet host — written only because of --allow-busy; do not quote these figures:** %s.\n\n", strings.Join(s.NotQuiet, "; "))
	} else if s.IdleNote != "" {
		fmt.Fprintf(w, "Quiet host: the 1-minute load average was %s at the start (at most %g). **Idle is slow:** %s.\n\n", r.LoadStart, p.MaxLoad, s.IdleNote)
	} else {
		fmt.Fprintf(w, "Quiet host: the 1-minute load average was %s at the start (at most %g) and idle's web p99 within %g× the unloaded device's.\n\n", r.LoadStart, p.MaxLoad, p.QuietFactor)
	}
	fmt.Fprintf(w, "Load average (1 min) %s at the start, %s at the end; the bench and its workloads ran at nice %d.\n\n", r.LoadStart, r.LoadEnd, r.Nice)
	fmt.Fprintf(w, "At the start, the web reader alone on the device for %s (the unloaded device): p50 %.0f µs, p99 %.0f µs, p99.9 %.0f µs.\n\n",
		p.Probe, r.Unloaded.P50, r.Unloaded.P99, r.Unloaded.P999)
	fmt.Fprintf(w, "Each cell: the streamer (%s, in a cgroup of its own) starts first and runs all along; with ddiskqos the daemon is up before it. "+
		"After %s of warm-up a web-like reader (4 KiB O_DIRECT random reads at %.0f/s) and %d light tenants (4 KiB O_DIRECT random reads at %.0f/s each: health checks, logs), "+
		"each in a new cgroup, run together for %s (the light tenants started at spread phases of their period, as independent containers do, within %s of the web reader); during that phase %d cold read(s) each of a 1 MiB and a 10 MiB file (page cache dropped), each from a new cgroup, "+
		"are spread over its first 80 %%. The streamer keeps running %s after the victims end. Idle is the same victims with no streamer. "+
		"Latencies are each request's service time; light tenants' requests are pooled into one distribution. Victims are compared with idle, the streamer "+
		"(its cgroup's counters, sampled every %s) with no QoS (original), each within its trial; \"from 1 s after\" is 1 s to %s after the victims ended.\n\n",
		p.StreamerDescribe(), p.Warmup, p.WebIOPS, p.Light, p.LightIOPS, p.Victims, time.Duration(float64(time.Second)/p.LightIOPS), p.ColdReads, p.After, p.SampleEvery, p.After)
	if plot != "" {
		fmt.Fprintf(w, "![victim p99 ÷ idle against the streamer's share: static caps, no QoS, ddiskqos](%s)\n\n", plot)
	}
	fmt.Fprintf(w, "Idle: web p50 %s, p99 %s, p99.9 %s; light p99 %s", fmtAbs(s.IdleWebP50us, "µs"), fmtAbs(s.IdleWebP99us, "µs"), fmtAbs(s.IdleWebP999us, "µs"), fmtAbs(s.IdleLightP99us, "µs"))
	for i, sz := range ColdSizes {
		if i < len(s.IdleColdMs) && s.IdleColdMs[i].N > 0 {
			fmt.Fprintf(w, "; cold %d MiB %.1f ms", sz>>20, s.IdleColdMs[i].Median)
		}
	}
	fmt.Fprintf(w, ".\n\n")
	fmt.Fprintf(w, "| configuration | web p99 ÷ idle | web p99.9 ÷ idle | light p99 ÷ idle | light p99.9 ÷ idle | cold 1 MiB ÷ idle | cold 10 MiB ÷ idle | streamer during ÷ no QoS | streamer from 1 s after ÷ no QoS | web p99 | light p99 | streamer during | cap |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, row := range s.Rows {
		cold := [2]string{"—", "—"}
		for i := range min(2, len(row.Cold)) {
			cold[i] = fmtX(row.Cold[i])
		}
		cp := "—"
		if row.CapMiBs > 0 {
			cp = fmt.Sprintf("%.0f MiB/s", row.CapMiBs)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %.0f µs | %.0f µs | %.0f MiB/s | %s |\n",
			row.Config, fmtX(row.WebP99), fmtX(row.WebP999), fmtX(row.LightP99), fmtX(row.LightP999), cold[0], cold[1],
			fmtPct(row.During), fmtPct(row.After), row.WebP99us, row.LightP99us, row.DuringMiBs, cp)
	}
	fmt.Fprintln(w)
	if slices.ContainsFunc(s.Rows, func(r HostRow) bool { return r.WebP99Settled.N > 0 || r.LightP99Settled.N > 0 }) {
		fmt.Fprintf(w, "%s The victims' first second\n\n", sub)
		fmt.Fprintf(w, "A new container's first requests wait behind whatever the streamer has queued at the device before any loop can react "+
			"(blk-throttle holds back only what is issued after a cap is written). Beside each figure of the table above, the same "+
			"without each victim's first second of requests (web %.0f, each light tenant %.0f), against idle's same: "+
			"where the two differ, the worst requests were the first ones. Not a bar; the bars judge every request.\n\n", p.WebIOPS, p.LightIOPS)
		fmt.Fprintf(w, "| configuration | web p99 ÷ idle: all / from the 2nd s | web p99.9 ÷ idle: all / from the 2nd s | light p99 ÷ idle: all / from the 2nd s | light p99.9 ÷ idle: all / from the 2nd s |\n")
		fmt.Fprintf(w, "| --- | --- | --- | --- | --- |\n")
		for _, row := range s.Rows {
			fmt.Fprintf(w, "| %s | %s / %s | %s / %s | %s / %s | %s / %s |\n", row.Config, fmtX(row.WebP99), fmtX(row.WebP99Settled),
				fmtX(row.WebP999), fmtX(row.WebP999Settled), fmtX(row.LightP99), fmtX(row.LightP99Settled), fmtX(row.LightP999), fmtX(row.LightP999Settled))
		}
		fmt.Fprintln(w)
	}
	if len(s.Frontiers) > 0 {
		fmt.Fprintf(w, "%s ddiskqos against the static-cap frontier\n\n", sub)
		fmt.Fprintf(w, "Each static cap is a point (streamer share while the victims ran, victim p99 ÷ idle); the frontier between two caps is interpolated linearly. "+
			"ddiskqos's point lies beyond it when its p99 is lower than the frontier's at its share.\n\n")
		fmt.Fprintf(w, "| victim | ddiskqos: streamer share | ddiskqos: p99 ÷ idle | frontier there | where | beyond |\n| --- | --- | --- | --- | --- | --- |\n")
		for _, f := range s.Frontiers {
			fr := "—"
			if f.Defined {
				fr = fmtUnit(f.Frontier, "x")
			}
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", f.Victim, fmtUnit(f.DDiskQoS.Share, "%"), fmtUnit(f.DDiskQoS.P99, "x"), fr, f.Between,
				map[bool]string{true: "yes", false: "**no**"}[f.Beyond])
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%s The bars\n\n", sub)
	fmt.Fprintf(w, "Judged on the median over trials; idle is `idle`, no QoS is `original`, both of the same trial. A goal is past the bar: reported, not counted.\n\n")
	fmt.Fprintf(w, "| configuration | bar | measured | verdict |\n| --- | --- | --- | --- |\n")
	for _, b := range s.Bars {
		op := "≤"
		if b.AtLeast {
			op = "≥"
		}
		lim, val := fmtLimit(b.Limit, b.Unit), fmtUnit(b.Value, b.Unit)
		if !b.Measured {
			val = "—"
		}
		what := fmt.Sprintf("%s %s %s", b.What, op, lim)
		if strings.HasPrefix(b.What, "not dominated") {
			what = fmt.Sprintf("%s (%s)", b.What, b.Note)
		}
		if strings.Contains(b.What, "beyond the static-cap frontier") {
			lim = fmtUnit(b.Limit, b.Unit)
			if !b.Measured {
				lim = "not measured"
			}
			what = fmt.Sprintf("%s (frontier %s, %s)", b.What, lim, b.Note)
		}
		verdict := "met"
		switch {
		case !b.Met && b.Goal:
			verdict = "goal not reached"
		case !b.Met:
			verdict = "**missed**"
		case b.Goal:
			verdict = "goal reached"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", b.Config, what, val, verdict)
	}
	fmt.Fprintf(w, "\n%d of %d bars missed.\n\n", s.Missed, countBars(s.Bars))
	fmt.Fprintf(w, "%s Configurations\n\n", sub)
	for _, c := range p.Configs {
		fmt.Fprintf(w, "- `%s`: %s\n", c, HostDescribe(c, r.Cgroup))
	}
	fmt.Fprintf(w, "\nThe static caps write %s on the streamer's cgroup.\n", knob)
}

func countBars(bs []HostBar) int {
	n := 0
	for _, b := range bs {
		if !b.Goal {
			n++
		}
	}
	return n
}
