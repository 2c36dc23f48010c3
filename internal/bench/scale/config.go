package scale

import (
	"fmt"
	"io"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/host"
)

// Config is one benchmark run.
type Config struct {
	Workloads  int           // N child cgroups
	Duration   time.Duration // the measured steady-state window
	Warmup     time.Duration // after the first full scan, before the window
	Interval   time.Duration // the daemon's tick
	IOFraction float64       // share of the workloads that read from the loop device
	Churn      float64       // share removed and as many created, after the window
	// ReadRate caps each reader, bytes/s.
	ReadRate int64
	// LoopMiB is the size of the loop device's backing file.
	LoopMiB int
	// ScratchDir holds the loop's backing file (not tmpfs: the loop
	// device reads it with direct I/O).
	ScratchDir string
	// LoadExe and LoadArgs start a load generator: LoadExe LoadArgs...
	// followed by the `ddiskqos workload` flags. Normally the ddiskqos
	// binary and ["workload"].
	LoadExe  string
	LoadArgs []string
	// Roots are the kernel filesystems (/sys, /proc).
	Roots host.Roots
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// CPUProfile, when set, receives a pprof CPU profile of the steady
	// window.
	CPUProfile io.Writer
	// HeapProfile, when set, receives a pprof heap profile taken at the
	// end of the steady window; HeapProfileStart one taken at its start,
	// so that the window's own allocations are the difference (pprof
	// -base).
	HeapProfile, HeapProfileStart io.Writer
}

// defaults fills the zero fields of c and rejects the values no run can take.
func (c *Config) defaults() error {
	if c.Workloads <= 0 {
		return fmt.Errorf("workloads %d: want at least 1", c.Workloads)
	}
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Duration <= 0 {
		c.Duration = 60 * time.Second
	}
	if c.Duration < 2*c.Interval {
		return fmt.Errorf("duration %s: want at least two intervals (%s)", c.Duration, 2*c.Interval)
	}
	if c.IOFraction < 0 || c.IOFraction > 1 || c.Churn < 0 || c.Churn > 1 {
		return fmt.Errorf("io-fraction %g, churn %g: want 0..1", c.IOFraction, c.Churn)
	}
	if c.ReadRate <= 0 {
		c.ReadRate = 1 << 20
	}
	if c.LoopMiB <= 0 {
		c.LoopMiB = 256
	}
	if c.ScratchDir == "" {
		c.ScratchDir = "/var/tmp"
	}
	if c.Roots.Sys == "" {
		c.Roots = host.Roots{Sys: "/sys", Proc: "/proc"}
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return nil
}
