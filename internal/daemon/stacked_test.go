package daemon

import (
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

func TestStackedOverlap(t *testing.T) {
	t.Parallel()
	vda, loop, loop2, dm, sda := cgroupfs.Dev{Major: 254}, cgroupfs.Dev{Major: 7, Minor: 64}, cgroupfs.Dev{Major: 7, Minor: 65},
		cgroupfs.Dev{Major: 253, Minor: 1}, cgroupfs.Dev{Major: 8}
	lowers := map[cgroupfs.Dev][]cgroupfs.Dev{loop: {vda}, loop2: {vda}, dm: {sda}}
	for _, tt := range []struct {
		name         string
		in           []devDelta
		wantR, wantW uint64
	}{
		{"loop read seen twice", []devDelta{{loop, 3 << 20, 0}, {vda, 3 << 20, 0}}, 3 << 20, 0},
		{"direct vda I/O beside the loop still counts", []devDelta{{loop, 1 << 20, 0}, {vda, 5 << 20, 0}}, 1 << 20, 0},
		{"lower not accounted", []devDelta{{loop, 2 << 20, 1 << 20}}, 0, 0},
		{"two loops share one lower's bytes once", []devDelta{{loop, 2 << 20, 0}, {loop2, 2 << 20, 0}, {vda, 3 << 20, 0}}, 3 << 20, 0},
		{"dm over sda, writes", []devDelta{{sda, 0, 4 << 20}, {dm, 0, 4 << 20}}, 0, 4 << 20},
		{"no stacked device", []devDelta{{vda, 7, 9}, {sda, 1, 1}}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r, w := stackedOverlap(lowers, tt.in)
			if r != tt.wantR || w != tt.wantW {
				t.Fatalf("overlap %d/%d, want %d/%d", r, w, tt.wantR, tt.wantW)
			}
		})
	}
	if r, w := stackedOverlap(nil, []devDelta{{loop, 1, 1}, {vda, 1, 1}}); r != 0 || w != 0 {
		t.Fatalf("no stack map: %d/%d", r, w)
	}
}
