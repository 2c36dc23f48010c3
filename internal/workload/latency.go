package workload

// Latencies: every request's, kept to report percentiles.

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency is a distribution of per-request latencies in microseconds. The
// percentiles come from an HDR histogram with 3 significant digits (within
// 0.1%); Max is exact.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// latencyRecorder collects request latencies: an HDR histogram for the
// percentiles and the exact maximum beside it.
type latencyRecorder struct {
	h    *hdrhistogram.Histogram
	max  time.Duration
	keep bool            // also keep every latency in all
	all  []time.Duration // with keep
}

// maxTrackedLatency is the histogram's top; slower requests count as this.
const maxTrackedLatency = time.Hour

func newLatencyRecorder() *latencyRecorder {
	// Nanoseconds, so a page-cache hit of under a microsecond is not a zero.
	return &latencyRecorder{h: hdrhistogram.New(1, int64(maxTrackedLatency), 3)}
}

func (l *latencyRecorder) record(d time.Duration) {
	l.max = max(l.max, d)
	if l.keep {
		l.all = append(l.all, d)
	}
	_ = l.h.RecordValue(int64(min(max(d, 1), maxTrackedLatency))) // in range: cannot fail
}

// merge adds o's latencies to l.
func (l *latencyRecorder) merge(o *latencyRecorder) {
	l.max = max(l.max, o.max)
	l.h.Merge(o.h) // same range and precision: drops nothing
	l.all = append(l.all, o.all...)
}

// kept is every kept latency in µs; nil without keep.
func (l *latencyRecorder) kept() []float64 {
	if !l.keep {
		return nil
	}
	us := make([]float64, len(l.all))
	for i, d := range l.all {
		us[i] = float64(d) / 1e3
	}
	return us
}

func (l *latencyRecorder) latency() Latency {
	if l.h.TotalCount() == 0 {
		return Latency{}
	}
	us := func(ns int64) float64 {
		// The histogram reports the top of a value's bucket, which can lie
		// above the exact maximum.
		return float64(min(time.Duration(ns), l.max)) / 1e3
	}
	return Latency{
		P50:  us(l.h.ValueAtQuantile(50)),
		P90:  us(l.h.ValueAtQuantile(90)),
		P99:  us(l.h.ValueAtQuantile(99)),
		P999: us(l.h.ValueAtQuantile(99.9)),
		Max:  us(int64(l.max)),
	}
}
