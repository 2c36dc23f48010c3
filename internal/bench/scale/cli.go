package scale

import "github.com/ddiskqos/ddiskqos/internal/cli"

// Info is the help of `ddiskqos bench scale`: what it does, how and
// to what end, next to the code that does it. Its flags are declared
// where the command is wired (cmd/ddiskqos).
var Info = cli.Info{
	Parent: "bench", Name: "scale",
	Summary: "N real cgroups (1,000 to 10,000) under the daemon: CPU, wall time, allocations and RSS per tick, scan and churn costs, /metrics time",
	Description: `Measure what the daemon costs with N workloads (--workloads is required):
create N real cgroups under a parent of the bench's own (cgroup v1 blkio or
v2, whatever this host's I/O hierarchy is), have a fraction of them read
from a loop device the bench attaches, run the daemon in this process with
the cgroup source on them, and report per tick its CPU (user+sys of this
process; the readers are child processes and do not count), wall time and
allocations, its RSS, the first full scan, the scan after churn, and
/metrics. Everything created is removed at the end, also on failure and
Ctrl-C. Needs root.`,
	Examples: `  ddiskqos bench scale --workloads 1000 --duration 30s
  ddiskqos bench scale --workloads 10000 --out scale.json \
      --cpuprofile cpu.pprof`,
}
