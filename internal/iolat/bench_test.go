package iolat

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/loopdev"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// BenchmarkOverhead measures what the sensor costs each request: 4 KiB
// random O_DIRECT reads of the fastest device this machine can make — a
// null_blk device when the module loads (and was not loaded by someone
// else), else a loop device over a file on tmpfs (served from memory) —
// without and with the sensor attached — and attached with the process
// eight cgroups below one the sensor watches for bio counts, as the daemon
// watches its demoted workloads (watched: each bio walks up to it) — one
// request at a time (qd1:
// ns/op is the latency, the difference the latency added) and from
// GOMAXPROCS threads at once (parallel: IOPS at saturation, the
// difference the throughput lost). Compare the two with benchstat:
//
//	go test -run XXX -bench Overhead -count 10 ./internal/iolat | tee bench.txt
//	benchstat -col /sensor bench.txt
//
// Figures measured on a loaded machine say nothing: run it on a quiet one.
func BenchmarkOverhead(b *testing.B) {
	testkit.NeedRoot(b)
	path, kind := fastDevice(b)
	b.Logf("device %s (%s)", path, kind)
	for _, mode := range []string{"qd1", "parallel"} {
		for _, sensor := range []string{"off", "on", "watched"} {
			b.Run("mode="+mode+"/sensor="+sensor, func(b *testing.B) {
				if sensor != "off" {
					s, err := Open(Options{})
					if err != nil {
						b.Fatalf("the sensor: %v", err)
					}
					b.Cleanup(func() { s.Close() }) // after watchAbove's
					if sensor == "watched" {
						watchAbove(b, s, path)
					}
				}
				benchReads(b, path, mode == "parallel")
			})
		}
	}
}

// watchAbove puts the benchmark's process benchDepth cgroups deep in the
// v1 blkio hierarchy and has the sensor watch, on path's device, the top
// of that chain and benchSiblings cgroups beside it: as the daemon watches
// its demoted workloads' cgroups, so every bio walks up the chain to its
// nearest watched ancestor (bios.go). The process goes back to its cgroup
// and the tree is removed at the end.
func watchAbove(b *testing.B, s *Sensor, path string) {
	b.Helper()
	l, err := cgroupfs.DetectLayout("/proc/self/mountinfo")
	if err != nil {
		b.Fatal(err)
	}
	m, ok := l.V1Controller("blkio")
	testkit.Need(b, ok, "no v1 blkio hierarchy (layout %s): the watched mode counts bios there", l.Mode)
	h := cgroupfs.Hierarchy{Version: 1, Mount: m.Mountpoint}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		b.Fatal(err)
	}
	dev := cgroupfs.Dev{Major: unix.Major(st.Rdev), Minor: unix.Minor(st.Rdev)}
	bios := s.Bios()
	testkit.Need(b, bios != nil, "the sensor has no bio counters here")
	top := fmt.Sprintf("/ddiskqos-iolat-bench-%d", os.Getpid())
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		b.Fatal(err)
	}
	back := "/"
	for _, line := range strings.Split(string(own), "\n") {
		if f := strings.SplitN(line, ":", 3); len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "blkio") {
			back = f[2]
		}
	}
	var made []string
	mk := func(rel string) uint64 {
		p, _ := h.Path(rel)
		if err := os.Mkdir(p, 0o755); err != nil {
			b.Fatal(err)
		}
		made = append(made, p)
		ino, err := h.DirIno(rel)
		if err != nil {
			b.Fatal(err)
		}
		return ino
	}
	var watched []uint64
	b.Cleanup(func() {
		// The premise: the reads were counted to the watched top.
		if n, err := bios.Bytes(watched[0], dev); err != nil || n == 0 {
			b.Errorf("the watched cgroup %s counted %d bytes of bios (%v): the walk was not measured", top, n, err)
		}
		if err := h.AddProcess(back, os.Getpid()); err != nil {
			b.Errorf("back to %s: %v", back, err)
		}
		for _, ino := range watched {
			bios.Unwatch(ino, dev)
		}
		for i := len(made) - 1; i >= 0; i-- {
			if err := os.Remove(made[i]); err != nil {
				b.Errorf("remove %s: %v", made[i], err)
			}
		}
	})
	watched = append(watched, mk(top))
	for i := range benchSiblings {
		watched = append(watched, mk(fmt.Sprintf("%s-sib%d", top, i)))
	}
	leaf := top
	for i := range benchDepth - 1 {
		leaf += fmt.Sprintf("/d%d", i)
		mk(leaf)
	}
	for _, ino := range watched {
		if err := bios.Watch(ino, dev); err != nil {
			b.Fatal(err)
		}
	}
	if err := h.AddProcess(leaf, os.Getpid()); err != nil {
		b.Fatal(err)
	}
}

// The watched mode's tree: the process this deep below a watched cgroup
// (the walk's longest is 16), that many other cgroups watched.
const (
	benchDepth    = 8
	benchSiblings = 99
)

// benchReads does b.N 4 KiB O_DIRECT reads at random aligned offsets of
// path's first 256 MiB (or its size), from one goroutine or GOMAXPROCS.
func benchReads(b *testing.B, path string, parallel bool) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	size, err := f.Seek(0, 2)
	if err != nil {
		b.Fatal(err)
	}
	blocks := min(size, 256<<20) / 4096
	read := func(r *rand.Rand, buf []byte) {
		if _, err := unix.Pread(int(f.Fd()), buf, r.Int64N(blocks)*4096); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			r, buf := rand.New(rand.NewPCG(rand.Uint64(), 1)), aligned()
			for pb.Next() {
				read(r, buf)
			}
		})
	} else {
		r, buf := rand.New(rand.NewPCG(1, 1)), aligned()
		for range b.N {
			read(r, buf)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IOPS")
}

// aligned is a 4 KiB buffer aligned for O_DIRECT.
func aligned() []byte {
	buf := make([]byte, 8192)
	off := int(uintptr(unsafe.Pointer(&buf[0])) & 4095)
	if off != 0 {
		off = 4096 - off
	}
	return buf[off : off+4096]
}

// fastDevice makes the benchmark's device, removed when it ends.
func fastDevice(b *testing.B) (path, kind string) {
	if _, err := os.Stat("/sys/module/null_blk"); os.IsNotExist(err) {
		out, err := exec.Command("modprobe", "null_blk", "nr_devices=1", "queue_mode=2", "irqmode=0", "gb=1").CombinedOutput()
		if err == nil {
			b.Cleanup(func() {
				if out, err := exec.Command("rmmod", "null_blk").CombinedOutput(); err != nil {
					b.Errorf("rmmod null_blk: %v: %s", err, out)
				}
			})
			for range 100 {
				if _, err := os.Stat("/dev/nullb0"); err == nil {
					return "/dev/nullb0", "null_blk, irqmode=0"
				}
				time.Sleep(10 * time.Millisecond)
			}
			b.Fatal("null_blk loaded, /dev/nullb0 did not appear")
		}
		b.Logf("null_blk does not load (%s): a loop device over tmpfs", strings.TrimSpace(string(out)))
	} else {
		b.Logf("null_blk is loaded already (someone else's): a loop device over tmpfs")
	}
	dir, err := os.MkdirTemp("/dev/shm", "ddiskqos-iolat-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	file := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(file, make([]byte, 256<<20), 0o600); err != nil {
		b.Fatal(err)
	}
	ld, err := loopdev.Attach(file, false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := ld.Detach(); err != nil {
			b.Errorf("detach %s: %v", ld.Path, err)
		}
	})
	return ld.Path, "loop over tmpfs"
}

// BenchmarkRealBios: what reading the bio counters of 1,000 watched
// cgroups costs, each key's (Bytes) against all of a disk's (Each), both
// read from the memory the kernel shares — the read budget's biosPerRead
// in internal/throttle. Keys of made-up inodes:
// the cost of a look-up does not depend on whether the cgroup exists.
func BenchmarkRealBios(b *testing.B) {
	testkit.NeedRoot(b)
	s, err := Open(Options{})
	testkit.Need(b, err == nil, "the I/O latency sensor cannot run here: %v", err)
	defer s.Close()
	bios := s.Bios()
	dev := cgroupfs.Dev{Major: 7, Minor: 999}
	const n = 1000
	for i := range n {
		if err := bios.Watch(uint64(1<<40+i), dev); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("bytes", func(b *testing.B) {
		for b.Loop() {
			for i := range n {
				if _, err := bios.Bytes(uint64(1<<40+i), dev); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("each", func(b *testing.B) {
		for b.Loop() {
			got := 0
			if err := bios.Each(dev, func(ino, bytes uint64) { got++ }); err != nil {
				b.Fatal(err)
			}
			if got != n {
				b.Fatalf("Each saw %d keys, want %d", got, n)
			}
		}
	})
}

// BenchmarkRealDump: what one read of the kernel's table of aggregates
// costs with 1,000 keys (the busy workloads of bench scale's 10,000 at
// 10 %), in tables of two sizes: the default bound and one sized to the
// keys. Keys of made-up inodes, put in from user space.
func BenchmarkRealDump(b *testing.B) {
	testkit.NeedRoot(b)
	for _, max := range []int{DefaultMaxKeys, 2048} {
		b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
			s, err := Open(Options{MaxKeys: max})
			testkit.Need(b, err == nil, "the I/O latency sensor cannot run here: %v", err)
			defer s.Close()
			const n = 1000
			for i := range n {
				k := rawKey{Cgroup: uint64(1<<40 + i), Dev: 7<<20 | 999}
				if err := s.objs.Aggregates.Update(k, rawValue{Count: 1}, 0); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				got := 0
				if err := s.dump(func(k rawKey, v *rawValue) { got++ }); err != nil {
					b.Fatal(err)
				}
				if got < n { // and the host's own, the programs being attached
					b.Fatalf("dump saw %d keys, want %d at least", got, n)
				}
			}
		})
	}
}
