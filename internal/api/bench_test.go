package api

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ddiskqos/ddiskqos/internal/metrics"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

func bigSnapshot(n int) *snapshot.Snapshot {
	s := fixture()
	s.Workloads = make([]*snapshot.Workload, n)
	s.Levels = [5]int{}
	for i := range s.Workloads {
		lvl := 1 + i%4
		s.Levels[lvl]++
		s.Workloads[i] = &snapshot.Workload{
			ID: fmt.Sprintf("%064x", i), Name: fmt.Sprintf("tenant-%05d-web", i), Cgroup: fmt.Sprintf("/docker/%064x", i),
			Level: lvl, BytesInLevel: uint64(i) << 10, Allowance: 8 << 20, Weight: 1000 >> (lvl - 1),
			ReadBytes: uint64(i) << 20, WriteBytes: uint64(i) << 19, ReadIOs: uint64(i) * 7, WriteIOs: uint64(i) * 3,
			ReadBps: float64(i) * 100, WriteBps: float64(i) * 50,
			Pressure: &snapshot.Pressure{SomeAvg10: 1.5, SomeTotal: uint64(i) * 1000, FullTotal: uint64(i) * 500},
			Applied:  []snapshot.Applied{{Device: "loop3", Dev: "7:3", Mechanism: "bfq-weight", Weight: 1000 >> (lvl - 1)}},
		}
	}
	return s
}

// BenchmarkAPI10000 times the two big answers of the daemon with 10,000
// workloads, through the same handler the daemon serves.
func BenchmarkAPI10000(b *testing.B) {
	snap := bigSnapshot(10000)
	current := snapshot.Fixed(func() *snapshot.Snapshot { return snap })
	reg := prometheus.NewRegistry()
	if _, err := metrics.New(reg, current); err != nil {
		b.Fatal(err)
	}
	h := NewHandler(current, reg, slog.New(slog.DiscardHandler))
	for _, target := range []string{"/metrics", "/v1/workloads", "/v1/workloads?level=1"} {
		b.Run(target, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "resp-bytes")
		})
	}
}
