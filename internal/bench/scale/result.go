package scale

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Dist summarises one per-tick quantity, milliseconds.
type Dist struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
	Max  float64 `json:"max"`
}

// Phase is a one-off event: how long until the daemon's snapshot showed
// it, how many ticks that took, and the CPU of the process meanwhile.
type Phase struct {
	WallMS float64 `json:"wall_ms"`
	CPUMS  float64 `json:"cpu_ms"`
	Ticks  int     `json:"ticks"`
	// TickMaxMS is the longest tick (the daemon's own measure) in it.
	TickMaxMS float64 `json:"tick_max_ms"`
}

// Churn is the scan after some workloads went and others came.
type Churn struct {
	Removed int `json:"removed"`
	Added   int `json:"added"`
	Phase
}

// Result is what one run measured.
type Result struct {
	// Build is the binary's own build (report.Binary), set by the caller.
	Build report.Build `json:"build"`
	Host  struct {
		Kernel string `json:"kernel"`
		CPU    string `json:"cpu"`
		CPUs   int    `json:"cpus"`
		MemMiB uint64 `json:"mem_mib"`
		Go     string `json:"go"`
	} `json:"host"`
	Cgroup    string `json:"cgroup"` // v1 | v2
	Hierarchy string `json:"hierarchy"`
	Device    string `json:"device"` // the loop device actuated on
	Mechanism string `json:"mechanism"`

	Workloads   int     `json:"workloads"`
	IOWorkloads int     `json:"io_workloads"`
	Interval    string  `json:"interval"`
	Duration    string  `json:"duration"`
	Ticks       int     `json:"ticks"`
	SetupS      float64 `json:"setup_s"` // making the cgroups (not the daemon)

	// Per tick in the steady window.
	CPUPerTickMS  Dist    `json:"cpu_per_tick_ms"` // user+sys between consecutive tick ends
	UserPerTickMS float64 `json:"user_per_tick_ms"`
	SysPerTickMS  float64 `json:"sys_per_tick_ms"`
	WallPerTickMS Dist    `json:"wall_per_tick_ms"` // the daemon's tick duration
	ReadsPerTick  float64 `json:"reads_per_tick"`   // workloads whose counter files were read
	// CPUSeriesMS is every tick's CPU of the window, in order: where the
	// spikes behind the p95 are.
	CPUSeriesMS []float64 `json:"cpu_series_ms"`
	// KernelPerTick is the workloads whose reading was taken from the I/O
	// latency sensor's kernel maps instead of their files.
	KernelPerTick float64 `json:"kernel_readings_per_tick"`
	// ReadCallsPerTick is the process's read system calls (read, pread,
	// readv: /proc/self/io syscr) per tick: every file read of the tick,
	// the throttle's fast loop and the rest, in a count that does not
	// depend on the machine's load.
	ReadCallsPerTick float64 `json:"read_calls_per_tick"`
	AllocsPerTick    float64 `json:"allocs_per_tick"`
	AllocKBPerTick   float64 `json:"alloc_kib_per_tick"`
	CPUPercent       float64 `json:"cpu_percent_of_one_core"`

	RSSMiB     float64 `json:"rss_mib"`
	RSSPeakMiB float64 `json:"rss_peak_mib"`
	HeapMiB    float64 `json:"heap_mib"`
	OpenFDs    int     `json:"open_fds"`
	NoFile     struct {
		Soft, Hard uint64
	} `json:"rlimit_nofile"`

	FirstScan Phase `json:"first_scan"`
	Churn     Churn `json:"churn"`

	MetricsPlain  Scrape `json:"metrics_plain"`
	MetricsGzip   Scrape `json:"metrics_gzip"`
	WorkloadsJSON Scrape `json:"v1_workloads"`
	Series        int    `json:"metrics_lines"`

	Errors []snapshot.ErrorCount `json:"errors,omitempty"`

	// Bar: the report's targets, and whether this run met them.
	Bar struct {
		CPUPerTickMS float64 `json:"cpu_per_tick_ms"`
		// CPUStat is the statistic of the CPU per tick the bar judges:
		// mean, or p95 when workloads read.
		CPUStat   string  `json:"cpu_stat"`
		RSSMiB    float64 `json:"rss_mib"`
		MetricsMS float64 `json:"metrics_ms"`
		CPUOK     bool    `json:"cpu_ok"`
		RSSOK     bool    `json:"rss_ok"`
		MetricsOK bool    `json:"metrics_ok"`
	} `json:"bar"`
}

// summarise fills the per-tick figures from the window's ticks: window[0]
// is the tick that ended just before the window started.
func summarise(res *Result, window []tickRecord, objs, bytes uint64, interval time.Duration) {
	var cpus, walls []float64
	var sum cpu
	reads, kern := 0, 0
	for i := 1; i < len(window); i++ {
		d := window[i].cpu.sub(window[i-1].cpu)
		sum.user += d.user
		sum.sys += d.sys
		cpus = append(cpus, ms(d.total()))
		walls = append(walls, ms(window[i].wall))
		reads += window[i].read
		kern += window[i].kern
	}
	n := float64(len(cpus))
	res.Ticks = len(cpus)
	res.CPUPerTickMS, res.WallPerTickMS = dist(cpus), dist(walls)
	res.CPUSeriesMS = make([]float64, len(cpus))
	for i, c := range cpus {
		res.CPUSeriesMS[i] = math.Round(c*100) / 100
	}
	res.UserPerTickMS, res.SysPerTickMS = ms(sum.user)/n, ms(sum.sys)/n
	res.ReadsPerTick, res.KernelPerTick = float64(reads)/n, float64(kern)/n
	res.AllocsPerTick, res.AllocKBPerTick = float64(objs)/n, float64(bytes)/1024/n
	span := window[len(window)-1].end.Sub(window[0].end)
	res.CPUPercent = 100 * sum.total().Seconds() / span.Seconds()
}

func dist(v []float64) Dist {
	if len(v) == 0 {
		return Dist{}
	}
	s := slices.Sorted(slices.Values(v))
	var sum float64
	for _, x := range s {
		sum += x
	}
	q := func(p float64) float64 { return s[min(len(s)-1, int(p*float64(len(s))))] }
	r := func(x float64) float64 { return math.Round(x*1000) / 1000 }
	return Dist{Mean: r(sum / float64(len(s))), P50: r(q(0.5)), P95: r(q(0.95)), Max: r(s[len(s)-1])}
}

// fillHost records the machine.
func fillHost(res *Result) {
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		res.Host.Kernel = strings.TrimSpace(string(b))
	}
	res.Host.CPUs = runtime.NumCPU()
	res.Host.Go = runtime.Version()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				res.Host.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb uint64
		fmt.Sscanf(string(b), "MemTotal: %d kB", &kb)
		res.Host.MemMiB = kb / 1024
	}
}
