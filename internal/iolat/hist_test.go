package iolat

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestBucketBounds: every time falls in the bucket whose bounds hold it,
// buckets tile the line without gap or overlap, and none is wider than a
// quarter of its lower bound (the resolution the docs promise).
func TestBucketBounds(t *testing.T) {
	t.Parallel()
	prevHi := 0.0
	for b := range NumBuckets {
		lo, hi := Bounds(b)
		if lo != prevHi {
			t.Fatalf("bucket %d starts at %g, the previous ended at %g", b, lo, prevHi)
		}
		if b > 0 && b < NumBuckets-1 && hi-lo > lo/4 {
			t.Errorf("bucket %d [%g, %g) wider than a quarter of its lower bound", b, lo, hi)
		}
		if b < NumBuckets-1 {
			for _, ns := range []uint64{uint64(lo), uint64(hi) - 1, uint64((lo + hi) / 2)} {
				if got := Bucket(ns); got != b {
					t.Errorf("Bucket(%d) = %d, want %d [%g, %g)", ns, got, b, lo, hi)
				}
			}
		}
		prevHi = hi
	}
	if !math.IsInf(prevHi, 1) {
		t.Errorf("last bucket ends at %g, want +Inf", prevHi)
	}
	for _, c := range []struct {
		ns   uint64
		want int
	}{
		{0, 0}, {1023, 0}, {1024, 1}, {1279, 1}, {1280, 2}, {2047, 4}, {2048, 5},
		{1 << 36, NumBuckets - 1}, {math.MaxUint64, NumBuckets - 1}, {1<<36 - 1, NumBuckets - 1},
	} {
		if got := Bucket(c.ns); got != c.want {
			t.Errorf("Bucket(%d) = %d, want %d", c.ns, got, c.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		ns := r.Uint64N(1 << 37)
		b := Bucket(ns)
		lo, hi := Bounds(b)
		if float64(ns) < lo || float64(ns) >= hi {
			t.Fatalf("Bucket(%d) = %d, whose bounds [%g, %g) do not hold it", ns, b, lo, hi)
		}
	}
}

// TestQuantile: quantiles of known samples, read back from the buckets,
// are within the bucket that holds the true value.
func TestQuantile(t *testing.T) {
	t.Parallel()
	var empty Hist
	if q := empty.Quantile(0.5); q != 0 {
		t.Errorf("empty: p50 %v, want 0", q)
	}
	r := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		name string
		gen  func() uint64
	}{
		{"uniform 100-200µs", func() uint64 { return 100_000 + r.Uint64N(100_000) }},
		{"exponential 1ms", func() uint64 { return uint64(r.ExpFloat64() * 1e6) }},
		{"bimodal 50µs/20ms", func() uint64 {
			if r.IntN(10) == 0 {
				return 20_000_000 + r.Uint64N(1_000_000)
			}
			return 50_000 + r.Uint64N(5_000)
		}},
		{"constant 3ms", func() uint64 { return 3_000_000 }},
	} {
		var h Hist
		var samples []uint64
		for range 5000 {
			ns := c.gen()
			samples = append(samples, ns)
			h[Bucket(ns)]++
		}
		slices.Sort(samples)
		for _, q := range []float64{0.01, 0.5, 0.9, 0.99, 1} {
			rank := int(math.Ceil(q*float64(len(samples)))) - 1
			truth := samples[rank]
			got := h.Quantile(q)
			lo, hi := Bounds(Bucket(truth))
			if float64(got) < lo || float64(got) >= hi {
				t.Errorf("%s: q%g = %v, the true %v is in [%v, %v)", c.name, q, got, time.Duration(truth),
					time.Duration(lo), time.Duration(hi))
			}
		}
	}
	var slow Hist
	slow[NumBuckets-1] = 3
	lo, _ := Bounds(NumBuckets - 1)
	if got := slow.Quantile(0.99); got != time.Duration(lo) {
		t.Errorf("all in the open last bucket: p99 %v, want its lower bound %v", got, time.Duration(lo))
	}
}

// TestCumulative: the coarse Prometheus buckets add the kernel's buckets
// below each bound, and the last holds every request below it.
func TestCumulative(t *testing.T) {
	t.Parallel()
	var h Hist
	for _, ns := range []uint64{500, 1500, 3000, 3500, 1 << 20, 1<<20 + 1, 1 << 30, 1 << 40} {
		h[Bucket(ns)]++
	}
	bounds := OctaveBounds(11, 31) // 2.048µs .. 2.1s
	got := h.Cumulative(bounds, nil)
	for i, le := range bounds {
		var want uint64
		for _, ns := range []uint64{500, 1500, 3000, 3500, 1 << 20, 1<<20 + 1, 1 << 30, 1 << 40} {
			if float64(ns)/1e9 < le {
				want++
			}
		}
		if got[i] != want {
			t.Errorf("le %g: %d, want %d", le, got[i], want)
		}
	}
	if n := h.Count(); n != 8 {
		t.Errorf("count %d, want 8", n)
	}
}

// TestAloneHist: a histogram of requests served alone counts, adds, and
// folds into a Hist bucket for bucket (the kernel's buckets up to the
// last).
func TestAloneHist(t *testing.T) {
	var a, b AloneHist
	a[Bucket(uint64(300*time.Microsecond))] = 3
	b[AloneBuckets-1] = 2
	a.Add(&b)
	if a.Count() != 5 {
		t.Fatalf("count %d, want 5", a.Count())
	}
	var h Hist
	h[0] = 1
	h.AddAlone(&a)
	if h.Count() != 6 || h[AloneBuckets-1] != 2 || h[Bucket(uint64(300*time.Microsecond))] != 3 {
		t.Fatalf("after AddAlone: count %d, last alone bucket %d", h.Count(), h[AloneBuckets-1])
	}
	if q := h.Quantile(0.5); q < 250*time.Microsecond || q > 375*time.Microsecond {
		t.Fatalf("median %v, want ~300µs", q)
	}
}
