package scale

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// cpu is the process's own CPU time so far (getrusage RUSAGE_SELF: every
// thread of this process, none of its children — the load generators).
type cpu struct{ user, sys time.Duration }

func cpuNow() cpu {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return cpu{}
	}
	return cpu{time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())}
}

func (c cpu) sub(o cpu) cpu        { return cpu{c.user - o.user, c.sys - o.sys} }
func (c cpu) total() time.Duration { return c.user + c.sys }

// allocs is the heap allocations (objects and bytes) so far, from
// runtime/metrics: no stop-the-world, unlike ReadMemStats.
type allocs struct{ objects, bytes uint64 }

func allocsNow() allocs {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	var a allocs
	if s[0].Value.Kind() == metrics.KindUint64 {
		a.objects = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindUint64 {
		a.bytes = s[1].Value.Uint64()
	}
	return a
}

// heapLive is the heap in use by live and not yet swept objects, bytes.
func heapLive() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		return s[0].Value.Uint64()
	}
	return 0
}

// procStatus returns fields of /proc/self/status in KiB (VmRSS, VmHWM).
func procStatus(keys ...string) map[string]uint64 {
	out := map[string]uint64{}
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || !slices.Contains(keys, k) {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out
}

// openFDs counts this process's open descriptors.
// readCalls is the process's read system calls so far (syscr of
// /proc/self/io: read, pread64, readv and the like); 0 when unreadable.
func readCalls() uint64 {
	return procIO("syscr")
}

func procIO(key string) uint64 {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// tickRecord is one tick as the bench saw it end.
type tickRecord struct {
	end  time.Time
	wall time.Duration // the daemon's own measure of the tick
	cpu  cpu           // process CPU at the end of the tick
	read int           // workloads whose counter files were read
	kern int           // workloads whose reading came from the kernel's maps
}

// observer forwards to the daemon's metrics and records every tick's end
// with the process's CPU time at that moment: the CPU between two tick
// ends is one tick's cost plus whatever the daemon did in between
// (its source, the Go runtime) — all of which is the daemon's cost.
type observer struct {
	next       daemon.Observer
	mu         sync.Mutex
	ts         []tickRecord
	read, kern int // set by ObserveSense before ObserveTick
	wake       chan struct{}
}

func newObserver(next daemon.Observer) *observer {
	return &observer{next: next, wake: make(chan struct{}, 1)}
}

func (o *observer) ObserveTick(d time.Duration) {
	c := cpuNow()
	o.mu.Lock()
	o.ts = append(o.ts, tickRecord{end: time.Now(), wall: d, cpu: c, read: o.read, kern: o.kern})
	o.mu.Unlock()
	o.next.ObserveTick(d)
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *observer) ObserveSense(read, kernel, skipped int) {
	o.read, o.kern = read, kernel // the loop's goroutine, as ObserveTick
	o.next.ObserveSense(read, kernel, skipped)
}

func (o *observer) Error(cause snapshot.ErrorCause)         { o.next.Error(cause) }
func (o *observer) LevelChange(from, to int, reason string) { o.next.LevelChange(from, to, reason) }

// ticks returns a copy of the ticks recorded so far.
func (o *observer) ticks() []tickRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ts)
}

// waitTick returns after the next tick ends (or after timeout).
func (o *observer) waitTick(timeout time.Duration) {
	select {
	case <-o.wake: // drop a stale wake-up
	default:
	}
	select {
	case <-o.wake:
	case <-time.After(timeout):
	}
}

// Scrape is one GET through the daemon's own HTTP handler.
type Scrape struct {
	WallMS float64 `json:"wall_ms"`
	CPUMS  float64 `json:"cpu_ms"` // user+sys of the whole process while it ran
	Bytes  int     `json:"bytes"`
	Status int     `json:"status"`
}

// countingWriter is a ResponseWriter that keeps only the size.
type countingWriter struct {
	h    http.Header
	n    int
	code int
}

func (w *countingWriter) Header() http.Header { return w.h }
func (w *countingWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = 200
	}
	w.n += len(p)
	return len(p), nil
}
func (w *countingWriter) WriteHeader(c int) { w.code = c }

// scrape runs one request through h right after a tick ended, so the
// tick's own CPU is not counted in it.
func scrape(h http.Handler, o *observer, interval time.Duration, target string, gzip bool) Scrape {
	o.waitTick(2 * interval)
	req := httptest.NewRequest(http.MethodGet, target, nil)
	if gzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	w := &countingWriter{h: http.Header{}}
	c0, t0 := cpuNow(), time.Now()
	h.ServeHTTP(w, req)
	wall, c := time.Since(t0), cpuNow().sub(c0)
	return Scrape{WallMS: ms(wall), CPUMS: ms(c.total()), Bytes: w.n, Status: w.code}
}

var _ io.Writer = (*countingWriter)(nil)

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
