package iolat

import (
	"math"
	"time"
)

// The histogram of request times, as the kernel half (iolat.c) fills it:
// log-linear, 4 buckets per octave of nanoseconds. Bucket 0 holds every time
// below 2^MinShift ns; bucket 1 + 4*(o-MinShift) + s holds
// [(4+s)·2^(o-2), (5+s)·2^(o-2)) ns, o being the octave (floor(log2 ns)) and
// s the two bits after the leading one; the last bucket also holds every
// time from 2^(MinShift+Octaves) ns (68.7 s) on. A bucket is at most a
// quarter of its lower bound wide: that is the resolution of a quantile.
const (
	MinShift   = 10 // 1.024 µs
	Octaves    = 26 // up to 2^36 ns = 68.7 s
	NumBuckets = 1 + 4*Octaves
)

// Hist is a histogram of request times in the kernel's buckets.
type Hist [NumBuckets]uint64

// TickHist is a histogram of one read's requests (Delta.Hist): the
// kernel's counters are 32 bits wide and a read adds fewer than 2^32 to
// any, so half the size of a Hist (at 2,000 aggregates moving a tick, the
// reader's deltas were 1.8 MB with 64-bit buckets).
type TickHist [NumBuckets]uint32

// Count is the number of requests in h.
func (h *TickHist) Count() uint64 { return count((*[NumBuckets]uint32)(h)) }

// Quantile is Hist.Quantile of h.
func (h *TickHist) Quantile(q float64) time.Duration {
	return quantile((*[NumBuckets]uint32)(h), q)
}

// Add adds o to h.
func (h *TickHist) Add(o *TickHist) {
	for i, c := range o {
		h[i] += c
	}
}

// AloneHist is a histogram of one read's requests served alone
// (Delta.Alone): the first AloneBuckets buckets, the last holding every
// time from its lower bound on.
type AloneHist [AloneBuckets]uint32

// Count is the number of requests in h.
func (h *AloneHist) Count() uint64 { return sum(h[:]) }

// Add adds o to h.
func (h *AloneHist) Add(o *AloneHist) { addTo(h[:], o[:]) }

// AddAlone adds one read's histogram of requests served alone to h.
func (h *Hist) AddAlone(o *AloneHist) { addTo(h[:AloneBuckets], o[:]) }

// AddTick adds one read's histogram to h.
func (h *Hist) AddTick(o *TickHist) {
	for i, c := range o {
		h[i] += uint64(c)
	}
}

// Bucket is the bucket of a time of ns nanoseconds (iolat.c's bucket()).
func Bucket(ns uint64) int {
	if ns < 1<<MinShift {
		return 0
	}
	o := 63
	for ns>>uint(o) == 0 {
		o--
	}
	if o >= MinShift+Octaves {
		return NumBuckets - 1
	}
	return 1 + 4*(o-MinShift) + int(ns>>uint(o-2)&3)
}

// Bounds returns the bucket's lower and upper bound in nanoseconds; the
// last bucket's upper bound is +Inf.
func Bounds(b int) (lo, hi float64) {
	if b <= 0 {
		return 0, 1 << MinShift
	}
	o := MinShift + (b-1)/4
	s := (b - 1) % 4
	unit := math.Ldexp(1, o-2)
	lo, hi = float64(4+s)*unit, float64(5+s)*unit
	if b >= NumBuckets-1 {
		hi = math.Inf(1)
	}
	return lo, hi
}

// Count is the number of requests in h.
func (h *Hist) Count() uint64 { return count((*[NumBuckets]uint64)(h)) }

func count[T uint32 | uint64](h *[NumBuckets]T) uint64 { return sum(h[:]) }

// sum is the sum of counters h.
func sum[T uint32 | uint64](h []T) uint64 {
	var n uint64
	for _, c := range h {
		n += uint64(c)
	}
	return n
}

// addTo adds src's counters to dst's (dst at least as long).
func addTo[D uint32 | uint64, S uint32](dst []D, src []S) {
	for i, c := range src {
		dst[i] += D(c)
	}
}

// Add adds o to h.
func (h *Hist) Add(o *Hist) {
	for i, c := range o {
		h[i] += c
	}
}

// Quantile returns the q-quantile (0 < q <= 1) of the times in h: the
// time below which a fraction q of the requests fall, interpolated
// linearly inside the bucket that holds it (the kernel keeps nothing
// finer). 0 when h is empty. In the last bucket, whose upper bound is
// infinite, its lower bound.
func (h *Hist) Quantile(q float64) time.Duration {
	return quantile((*[NumBuckets]uint64)(h), q)
}

func quantile[T uint32 | uint64](h *[NumBuckets]T, q float64) time.Duration {
	n := count(h)
	if n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	// The rank of the request at the quantile, 1-based: the smallest r
	// with r >= q*n (nearest rank).
	rank := uint64(math.Ceil(q * float64(n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for b, ct := range h {
		c := uint64(ct)
		if c == 0 || seen+c < rank {
			seen += c
			continue
		}
		lo, hi := Bounds(b)
		if math.IsInf(hi, 1) {
			return time.Duration(lo)
		}
		// The c requests of the bucket spread evenly over it: the
		// k-th of them sits at the middle of its k-th share.
		k := float64(rank - seen)
		return time.Duration(lo + (hi-lo)*(k-0.5)/float64(c))
	}
	return 0 // not reached: rank <= n
}

// Cumulative returns, for each upper bound in bounds (seconds, rising, each
// a bucket boundary), how many requests of h took at most that long:
// the counts of a Prometheus histogram whose buckets are coarser than the
// kernel's. A bound that is no bucket boundary counts the buckets whose
// upper bound it reaches.
func (h *Hist) Cumulative(bounds []float64, dst []uint64) []uint64 {
	dst = dst[:0]
	var sum uint64
	b := 0
	for _, le := range bounds {
		for b < NumBuckets {
			_, hi := Bounds(b)
			if hi/1e9 > le {
				break
			}
			sum += h[b]
			b++
		}
		dst = append(dst, sum)
	}
	return dst
}

// OctaveBounds are the bucket boundaries at every octave from 2^from to
// 2^to nanoseconds, in seconds: the coarse buckets of the Prometheus
// histogram (a boundary of the kernel's buckets each, so no count is split).
func OctaveBounds(from, to int) []float64 {
	var out []float64
	for o := from; o <= to; o++ {
		out = append(out, math.Ldexp(1, o)/1e9)
	}
	return out
}
