package cgroupfs

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// The fuzz targets check that no kernel text can panic a parser and that
// what a parser accepts survives a round trip through the kernel's format.

func FuzzParseIOStat(f *testing.F) {
	f.Add([]byte("8:16 rbytes=1459200 wbytes=314773504 rios=192 wios=353 dbytes=0 dios=0\n"))
	f.Add([]byte("254:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0 cost.vrate=100.00\n\n"))
	f.Add([]byte("8:0 rbytes=\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		devs, err := ParseIOStat(data, nil)
		if err != nil {
			return
		}
		var b bytes.Buffer
		for _, d := range devs {
			fmt.Fprintf(&b, "%s rbytes=%d wbytes=%d rios=%d wios=%d dbytes=%d dios=%d\n", d.Dev, d.RBytes, d.WBytes, d.RIOs, d.WIOs, d.DBytes, d.DIOs)
		}
		again, err := ParseIOStat(b.Bytes(), nil)
		if err != nil {
			t.Fatalf("reparse of %q: %v", b.String(), err)
		}
		if len(devs) > 0 && !reflect.DeepEqual(devs, again) {
			t.Fatalf("round trip: %+v != %+v", devs, again)
		}
	})
}

func FuzzParseBlkioRWStat(f *testing.F) {
	f.Add([]byte(blkioBytes), false)
	f.Add([]byte(blkioIOs), true)
	f.Add([]byte("Total 0\n"), false)
	f.Fuzz(func(t *testing.T, data []byte, ios bool) {
		devs, err := ParseBlkioRWStat(data, "f", ios, nil)
		if err != nil {
			return
		}
		seen := map[Dev]bool{}
		for _, d := range devs {
			if seen[d.Dev] {
				t.Fatalf("device %s listed twice", d.Dev)
			}
			seen[d.Dev] = true
		}
	})
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=1.50 avg60=0.25 avg300=0.00 total=12345\nfull avg10=0.10 avg60=0.00 avg300=0.00 total=99\n"))
	f.Add([]byte("some total=1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePressure(data)
		if err != nil {
			return
		}
		if !bytes.Contains(data, []byte("some")) {
			t.Fatalf("accepted input without a some line: %q -> %+v", data, p)
		}
		for _, v := range []float64{p.Some.Avg10, p.Some.Avg60, p.Some.Avg300, p.Full.Avg10, p.Full.Avg60, p.Full.Avg300} {
			if !(v >= 0 && v <= 100) {
				t.Fatalf("percentage %v out of range in %+v", v, p)
			}
		}
	})
}

func FuzzParseWeights(f *testing.F) {
	f.Add([]byte("default 100\n7:0 300\n"))
	f.Add([]byte("100\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := ParseWeights(data, "w")
		if err != nil {
			return
		}
		var b strings.Builder
		if w.HasDefault {
			fmt.Fprintf(&b, "default %d\n", w.Default)
		}
		for _, d := range w.Devices {
			fmt.Fprintf(&b, "%s %d\n", d.Dev, d.Value)
		}
		again, err := ParseWeights([]byte(b.String()), "w")
		if err != nil || again.Default != w.Default || len(again.Devices) != len(w.Devices) {
			t.Fatalf("round trip of %q: %+v vs %+v, %v", b.String(), again, w, err)
		}
	})
}

func FuzzParseIOMax(f *testing.F) {
	f.Add([]byte("8:16 rbps=2097152 wbps=max riops=max wiops=120\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = ParseIOMax(data)
	})
}

func FuzzParseMountInfo(f *testing.F) {
	f.Add("38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
	f.Add("38 31 0:35 / /x\\040y rw - cgroup cgroup rw,blkio\n")
	f.Fuzz(func(t *testing.T, data string) {
		l, err := ParseMountInfo(strings.NewReader(data))
		if err != nil {
			return
		}
		switch l.Mode {
		case ModeV1, ModeV2, ModeHybrid:
		default:
			t.Fatalf("mode %q", l.Mode)
		}
		if _, err := l.IOHierarchy(); err != nil && l.Mode != ModeV1 {
			t.Fatalf("mode %s without an I/O hierarchy: %v", l.Mode, err)
		}
	})
}
