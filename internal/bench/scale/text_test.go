package scale

import (
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/bench/report"
)

// WriteText gives one figure a line, each with its bar met ("ok") or
// MISSED, and the errors last.
func TestWriteText(t *testing.T) {
	t.Parallel()
	var r Result
	r.Workloads, r.IOWorkloads, r.Cgroup, r.Device, r.Mechanism = 1000, 10, "v1", "loop7", "throttle"
	r.CPUPerTickMS.Mean, r.CPUPerTickMS.P95 = 2.5, 4
	r.Bar.CPUPerTickMS, r.Bar.CPUStat, r.Bar.CPUOK = 3, "p95", false
	r.Bar.RSSMiB, r.RSSMiB = 64, 80
	r.Build = report.Build{Revision: "abc123", Modified: true}
	var b strings.Builder
	WriteText(&b, r)
	out := b.String()
	for _, want := range []string{
		"ddiskqos bench scale: 1000 workloads (10 reading) on cgroup v1, loop7 (throttle)",
		"bar 3 ms (p95): MISSED", "bar 64 MiB: MISSED", "binary: built from abc123 (modified tree)\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 11 {
		t.Errorf("%d lines, want 11:\n%s", n, out)
	}
}
