package throttle

import (
	"math"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// TestLoadSmoothing: a workload's load follows a steady rate whatever the
// period (the fast loop's period grows with many workloads), takes about
// shareWindow to settle, and lets one 1 MiB read of a health check stay
// far below the share threshold of a 1.7 GB/s device.
func TestLoadSmoothing(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, period := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond} {
		var l load
		now := t0
		l.add(now, 0, 0) // starts the clock
		for now.Sub(t0) < 2*time.Second {
			now = now.Add(period)
			l.add(now, 200e6*period.Seconds(), 8)
		}
		if math.Abs(l.rate-200e6) > 1e6 || math.Abs(l.depth-8) > 0.05 {
			t.Errorf("period %s: steady 200 MB/s at depth 8 read as %.0f B/s depth %.2f", period, l.rate, l.depth)
		}
	}
	// Rising: after one window about 63 % of the rate.
	var l load
	now := t0
	l.add(now, 0, 0)
	for range 10 {
		now = now.Add(10 * time.Millisecond)
		l.add(now, 2e6, -1)
	}
	if f := l.rate / 200e6; f < 0.6 || f > 0.66 {
		t.Errorf("after one window of 200 MB/s: %.2f of the rate, want ~0.63", f)
	}
	if l.depth != 0 {
		t.Errorf("depth %.2f with no depth ever known, want 0", l.depth)
	}
	// One 1 MiB read, then nothing: its peak share of 1.7 GB/s.
	var h load
	now = t0
	h.add(now, 0, 0)
	now = now.Add(10 * time.Millisecond)
	h.add(now, 1<<20, 0)
	if share := h.rate / 1.7e9; share >= DefaultLight/5 {
		t.Errorf("one 1 MiB read is %.3f of a 1.7 GB/s device, want well under %.2f", share, DefaultLight)
	}
	// A clock that did not move changes nothing.
	r := h.rate
	h.add(now, 100<<20, 0)
	if h.rate != r {
		t.Errorf("an add at the same time moved the rate from %.0f to %.0f", r, h.rate)
	}
}

// TestDeviceDepthEstimate: a workload's requests in flight, estimated as
// the device's mean depth over the period times its part of the device's
// bytes.
func TestDeviceDepthEstimate(t *testing.T) {
	prev := cgroupfs.BlockStat{ReadSectors: 1000, TimeInQueueMs: 5000}
	// 10 ms in which the device moved 32 MiB at a mean depth of 32.
	cur := prev
	cur.ReadSectors += 32 << 20 / 512
	cur.TimeInQueueMs += 320
	d := periodOf(prev, cur, 10*time.Millisecond)
	for _, c := range []struct {
		name  string
		bytes float64
		want  float64
	}{
		{"the stream moving all of it holds the queue", 32 << 20, 32},
		{"a 4 KiB reader beside it holds next to nothing", 4096, 32 * 4096 / float64(32<<20)},
		{"counted beyond the device's bytes (counters read apart): at most the device's depth", 64 << 20, 32},
		{"nothing moved", 0, 0},
	} {
		if got := d.estDepth(c.bytes); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: %.4f, want %.4f", c.name, got, c.want)
		}
	}
	if got := (devPeriod{}).estDepth(1 << 20); got != -1 {
		t.Errorf("no device period: %.2f, want -1 (not known)", got)
	}
	if got := periodOf(prev, prev, 10*time.Millisecond).estDepth(1 << 20); got != 0 {
		t.Errorf("an idle device: %.2f, want 0", got)
	}
	if got := periodOf(prev, cur, 0); got.ok {
		t.Errorf("a period of no time: %+v, want not ok", got)
	}
}
