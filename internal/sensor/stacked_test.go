package sensor

import (
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

func TestStackedOverlap(t *testing.T) {
	t.Parallel()
	vda, loop, loop2, dm, sda := cgroupfs.Dev{Major: 254}, cgroupfs.Dev{Major: 7, Minor: 64}, cgroupfs.Dev{Major: 7, Minor: 65},
		cgroupfs.Dev{Major: 253, Minor: 1}, cgroupfs.Dev{Major: 8}
	lowers := map[cgroupfs.Dev][]cgroupfs.Dev{loop: {vda}, loop2: {vda}, dm: {sda}}
	const mb = 140_600_000
	for _, tt := range []struct {
		name string
		in   []devDelta
		want overlap
	}{
		{"loop read seen twice", []devDelta{{loop, 3 << 20, 0, 48, 0}, {vda, 3 << 20, 0, 24, 0}}, overlap{r: 3 << 20, rIOs: 24}},
		// The case measured on /v1/workloads: 140.6 MB read from a loop
		// device over a file on vda in 64 KiB requests, 2,145 on the loop
		// and 2,139 more on vda; read_ios was 4,284 and must be 2,145.
		{"loop over vda, 64 KiB reads", []devDelta{{loop, mb, 0, 2145, 0}, {vda, mb, 0, 2139, 0}}, overlap{r: mb, rIOs: 2139}},
		// vda shows 5 MiB in 100 requests, 1 MiB of which came through the
		// loop: a fifth of its requests are the loop's.
		{"direct vda I/O beside the loop still counts", []devDelta{{loop, 1 << 20, 0, 16, 0}, {vda, 5 << 20, 0, 100, 0}}, overlap{r: 1 << 20, rIOs: 20}},
		{"lower not accounted", []devDelta{{loop, 2 << 20, 1 << 20, 32, 16}}, overlap{}},
		// vda's 3 MiB in 30 requests: loop takes 2 MiB (20), loop2 the last
		// 1 MiB (10); its other 1 MiB has no lower bytes left.
		{"two loops share one lower's bytes once", []devDelta{{loop, 2 << 20, 0, 32, 0}, {loop2, 2 << 20, 0, 32, 0}, {vda, 3 << 20, 0, 30, 0}}, overlap{r: 3 << 20, rIOs: 30}},
		{"dm over sda, writes", []devDelta{{sda, 0, 4 << 20, 0, 7}, {dm, 0, 4 << 20, 0, 64}}, overlap{w: 4 << 20, wIOs: 7}},
		// 1 byte of 3 in 2 requests: 2/3 rounds to 1.
		{"rounding", []devDelta{{loop, 1, 0, 1, 0}, {vda, 3, 0, 2, 0}}, overlap{r: 1, rIOs: 1}},
		{"no stacked device", []devDelta{{vda, 7, 9, 1, 1}, {sda, 1, 1, 1, 1}}, overlap{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var sumR, sumIOs uint64
			for _, d := range tt.in {
				sumR += d.r + d.w
				sumIOs += d.rIOs + d.wIOs
			}
			got := stackedOverlap(lowers, tt.in)
			if got != tt.want {
				t.Fatalf("overlap %+v, want %+v", got, tt.want)
			}
			// What is left in the deltas is what gets counted.
			var leftR, leftIOs uint64
			for _, d := range tt.in {
				leftR += d.r + d.w
				leftIOs += d.rIOs + d.wIOs
			}
			if leftR != sumR-got.r-got.w || leftIOs != sumIOs-got.rIOs-got.wIOs {
				t.Fatalf("deltas left %d B %d IOs; want %d B %d IOs", leftR, leftIOs, sumR-got.r-got.w, sumIOs-got.rIOs-got.wIOs)
			}
		})
	}
	if o := stackedOverlap(nil, []devDelta{{loop, 1, 1, 1, 1}, {vda, 1, 1, 1, 1}}); o != (overlap{}) {
		t.Fatalf("no stack map: %+v", o)
	}
}

func TestShare(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ ios, part, whole, want uint64 }{
		{100, 1, 5, 20},
		{2139, 7, 7, 2139},
		{10, 0, 5, 0},
		{10, 5, 0, 0},
		{3, 1, 2, 2}, // 1.5 rounds up
		{1 << 40, 1 << 62, 1<<63 + 1, 1 << 39},
	} {
		if got := share(tt.ios, tt.part, tt.whole); got != tt.want {
			t.Errorf("share(%d, %d, %d) = %d, want %d", tt.ios, tt.part, tt.whole, got, tt.want)
		}
	}
}

// TestStackedLag: a reading that falls between a loop device's requests
// and its lower disk's (submitted after them) leaves the lower's bytes of
// those requests to the next reading: they are matched there with the
// loop's bytes the lower had not shown, not charged as I/O of their own.
// What the lower never shows is carried one reading only.
func TestStackedLag(t *testing.T) {
	t.Parallel()
	loop, vda := cgroupfs.Dev{Major: 7, Minor: 0}, cgroupfs.Dev{Major: 254, Minor: 0}
	s := &Sensor{Devices: []cgroupfs.Dev{loop}, Stacked: map[cgroupfs.Dev][]cgroupfs.Dev{loop: {vda}}, MaxPeriod: 4}
	c := s.NewCounters(0, false)
	t0 := time.Unix(100, 0)
	read := func(i int, l, v uint64) Reading {
		t.Helper()
		s.BeginTick()
		defer s.EndTick()
		return s.Take(c, t0.Add(time.Duration(i)*time.Second), 1, cgroupfs.IOStat{Devices: []cgroupfs.DeviceIO{
			{Dev: loop, RBytes: l, RIOs: l / 4096}, {Dev: vda, RBytes: v, RIOs: v / 8192}}})
	}
	read(0, 0, 0)
	const k = 4096
	for i, tc := range []struct{ loop, vda, want uint64 }{
		{100 * k, 98 * k, 100 * k},  // two of the lower's requests not yet
		{200 * k, 200 * k, 100 * k}, // there now: matched, not charged again
		{200 * k, 200 * k, 0},
		{300 * k, 300 * k, 100 * k},
		{400 * k, 300 * k, 100 * k}, // served from the backing file's cache
		{400 * k, 300 * k, 0},
		{400 * k, 310 * k, 10 * k}, // straight to the lower, two readings later: its own
	} {
		if rd := read(i+1, tc.loop, tc.vda); rd.Delta != tc.want {
			t.Fatalf("reading %d (loop %d, vda %d): charged %d, want %d", i+1, tc.loop, tc.vda, rd.Delta, tc.want)
		}
	}
	if c.RBytes != 410*k {
		t.Fatalf("charged %d in all, want %d", c.RBytes, 410*k)
	}
}
