package scale

import (
	"cmp"
	"fmt"
	"io"
	"strings"
)

// WriteText writes the result r for a person, one figure a line with
// its bar, met or MISSED.
func WriteText(w io.Writer, r Result) {
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "MISSED"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ddiskqos bench scale: %d workloads (%d reading) on cgroup %s, %s (%s), interval %s\n",
		r.Workloads, r.IOWorkloads, r.Cgroup, r.Device, r.Mechanism, r.Interval)
	fmt.Fprintf(&b, "binary: built from %s\n", r.Build)
	fmt.Fprintf(&b, "host: %s, %d CPUs, %d MiB, kernel %s, %s\n", r.Host.CPU, r.Host.CPUs, r.Host.MemMiB, r.Host.Kernel, r.Host.Go)
	fmt.Fprintf(&b, "cpu per tick     %8.2f ms mean  %8.2f p50  %8.2f p95  %8.2f max  (user %.2f, sys %.2f; %.2f %% of one core)  bar %.0f ms (%s): %s\n",
		r.CPUPerTickMS.Mean, r.CPUPerTickMS.P50, r.CPUPerTickMS.P95, r.CPUPerTickMS.Max, r.UserPerTickMS, r.SysPerTickMS, r.CPUPercent,
		r.Bar.CPUPerTickMS, cmp.Or(r.Bar.CPUStat, "mean"), ok(r.Bar.CPUOK))
	fmt.Fprintf(&b, "wall per tick    %8.2f ms mean  %8.2f p50  %8.2f p95  %8.2f max\n",
		r.WallPerTickMS.Mean, r.WallPerTickMS.P50, r.WallPerTickMS.P95, r.WallPerTickMS.Max)
	fmt.Fprintf(&b, "reads per tick   %8.0f    from the kernel's maps %.0f    read calls per tick %.0f    allocations per tick %.0f (%.0f KiB)    ticks %d\n",
		r.ReadsPerTick, r.KernelPerTick, r.ReadCallsPerTick, r.AllocsPerTick, r.AllocKBPerTick, r.Ticks)
	fmt.Fprintf(&b, "rss              %8.1f MiB (peak %.1f, heap %.1f)  bar %.0f MiB: %s    open fds %d (limit %d/%d)\n",
		r.RSSMiB, r.RSSPeakMiB, r.HeapMiB, r.Bar.RSSMiB, ok(r.Bar.RSSOK), r.OpenFDs, r.NoFile.Soft, r.NoFile.Hard)
	fmt.Fprintf(&b, "first full scan  %8.0f ms wall, %.0f ms CPU, %d ticks (longest %.1f ms)\n",
		r.FirstScan.WallMS, r.FirstScan.CPUMS, r.FirstScan.Ticks, r.FirstScan.TickMaxMS)
	fmt.Fprintf(&b, "after churn      %8.0f ms wall, %.0f ms CPU, %d ticks (longest %.1f ms): -%d +%d\n",
		r.Churn.WallMS, r.Churn.CPUMS, r.Churn.Ticks, r.Churn.TickMaxMS, r.Churn.Removed, r.Churn.Added)
	fmt.Fprintf(&b, "/metrics         %8.1f ms wall, %.1f ms CPU plain (%d B, %d samples); %.1f ms wall, %.1f ms CPU gzip (%d B)  bar %.0f ms: %s\n",
		r.MetricsPlain.WallMS, r.MetricsPlain.CPUMS, r.MetricsPlain.Bytes, r.Series, r.MetricsGzip.WallMS, r.MetricsGzip.CPUMS,
		r.MetricsGzip.Bytes, r.Bar.MetricsMS, ok(r.Bar.MetricsOK))
	fmt.Fprintf(&b, "/v1/workloads    %8.1f ms wall, %.1f ms CPU (%d B)\n", r.WorkloadsJSON.WallMS, r.WorkloadsJSON.CPUMS, r.WorkloadsJSON.Bytes)
	for _, e := range r.Errors {
		fmt.Fprintf(&b, "errors           %s: %d\n", e.Cause, e.Count)
	}
	io.WriteString(w, b.String())
}
