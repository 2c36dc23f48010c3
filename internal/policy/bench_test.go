package policy

import (
	"strconv"
	"testing"
	"time"
)

// BenchmarkObserve10k measures one tick of 10,000 workloads: one op is
// 10,000 Observe calls. Workloads do between 0 and ~4 MiB per tick, so they
// drop and get boosted as the ticks go by; one in ten is pinned, one in a
// hundred exempt, one in a hundred has a bad label.
func BenchmarkObserve10k(b *testing.B) {
	const n = 10_000
	cfg := DefaultConfig()
	cfg.BoostAfter = 20 * time.Second // several boost cycles within a run
	e := newEngine(b, cfg)
	ids := make([]string, n)
	labels := make([]map[string]string, n)
	deltas := make([]uint64, n)
	for i := range ids {
		ids[i] = "0123456789abcdef0123456789abcdef0123456789abcdef" + strconv.Itoa(100000+i)
		l := map[string]string{"com.docker.compose.project": "bench", "com.docker.compose.service": "svc" + strconv.Itoa(i%50)}
		switch {
		case i%100 == 0:
			l[LabelExempt] = "true"
		case i%100 == 1:
			l[LabelLevel] = "five"
		case i%10 == 2:
			l[LabelLevel] = strconv.Itoa(1 + i%4)
		}
		labels[i] = l
		deltas[i] = uint64(i%17) * 256 << 10
	}
	now := t0
	tick := func() (transitions int) {
		now = now.Add(time.Second)
		for i, id := range ids {
			d := e.Observe(now, id, deltas[i], labels[i])
			transitions += len(d.Transitions())
		}
		return transitions
	}
	tick() // first sight: allocates the per-workload records
	b.ReportAllocs()
	var trs int
	for b.Loop() {
		trs += tick()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/workload")
	b.ReportMetric(float64(trs)/float64(b.N), "transitions/op")
}
