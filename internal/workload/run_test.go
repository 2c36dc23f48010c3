package workload

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// diskDir returns a fresh directory on a disk filesystem, not tmpfs, so
// that O_DIRECT and the page cache behave as they do on a real disk. It
// falls back to t.TempDir when neither /var/tmp nor the package directory
// will do.
func diskDir(t *testing.T) string {
	t.Helper()
	for _, base := range []string{"/var/tmp", "."} {
		var st unix.Statfs_t
		if unix.Statfs(base, &st) != nil || st.Type == unix.TMPFS_MAGIC {
			continue
		}
		d, err := os.MkdirTemp(base, "workload-test-")
		if err != nil {
			continue
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		return d
	}
	return t.TempDir()
}

// testFile writes size patterned bytes to a new file in dir, synced so that
// its pages are clean and can be dropped from the cache.
func testFile(t *testing.T, dir string, size int) string {
	t.Helper()
	path := filepath.Join(dir, "data")
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + i>>12)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	return path
}

// resident reports, page by page, whether path's pages are in the page cache.
func resident(t *testing.T, path string) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	pg := os.Getpagesize()
	vec := make([]byte, (len(m)+pg-1)/pg)
	// x/sys/unix has no Mincore for Linux.
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m))),
		uintptr(len(m)), uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
		t.Fatalf("mincore %s: %v", path, errno)
	}
	in := make([]bool, len(vec))
	for i, v := range vec {
		in[i] = v&1 != 0
	}
	return in
}

func countTrue(b []bool) (n int) {
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func mustRun(t *testing.T, s Spec) Result {
	t.Helper()
	r, err := Run(t.Context(), s)
	if err != nil {
		t.Fatalf("Run(%+v): %v", s, err)
	}
	return r
}

// skipIfNoDirect skips when the filesystem holding path refuses to open it
// with O_DIRECT. Only the open is probed: an EINVAL from a read or write
// afterwards is a bug (a misaligned buffer, say) and must fail the test.
func skipIfNoDirect(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_DIRECT, 0o644)
	if errors.Is(err, unix.EINVAL) {
		var st unix.Statfs_t
		_ = unix.Statfs(filepath.Dir(path), &st)
		testkit.Need(t, false, "filesystem of %s (type %#x) refuses O_DIRECT: %v", path, st.Type, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestRunSequentialReadIsExact(t *testing.T) {
	t.Parallel()
	const size = 10<<20 + 123
	path := testFile(t, t.TempDir(), size)
	for _, tc := range []struct {
		s              Spec
		bytes, ops, bs int64
	}{
		{Spec{}, size, 11, 1 << 20},
		{Spec{BlockSize: 4096}, size, (size + 4095) / 4096, 4096},
		{Spec{BlockSize: 1 << 20, Offset: 1 << 20, Span: 3 << 20}, 3 << 20, 3, 1 << 20},
		{Spec{BlockSize: 1 << 20, Offset: 1000, Span: 1 << 30}, size - 1000, 10, 1 << 20}, // clipped at EOF
		{Spec{Bytes: 2<<20 + 1}, 2<<20 + 1, 3, 1 << 20},
		{Spec{Bytes: 5 << 20, Span: 2 << 20, Loop: true}, 5 << 20, 5, 1 << 20},
		{Spec{Bytes: 3 << 20, Offset: size - 1<<20, Loop: true}, 3 << 20, 3, 1 << 20},
	} {
		s := tc.s
		s.Path, s.Op = path, OpRead
		r := mustRun(t, s)
		if r.Bytes != tc.bytes || r.Ops != tc.ops || r.BlockSize != tc.bs {
			t.Errorf("%+v: %d bytes, %d ops of %d; want %d bytes, %d ops of %d",
				tc.s, r.Bytes, r.Ops, r.BlockSize, tc.bytes, tc.ops, tc.bs)
		}
		if r.Elapsed <= 0 || r.BytesPerSec <= 0 || !r.End.After(r.Start) {
			t.Errorf("%+v: elapsed %v, %v B/s, %v..%v", tc.s, r.Elapsed, r.BytesPerSec, r.Start, r.End)
		}
		l := r.Latency
		if !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max) {
			t.Errorf("%+v: latency %+v is not ordered", tc.s, l)
		}
	}
}

// TestRunIODepth runs sequential and random jobs with many requests in
// flight: a sequential pass still reads every block exactly once, and the
// limits hold for the job as a whole.
func TestRunIODepth(t *testing.T) {
	t.Parallel()
	const size = 10<<20 + 123
	path := testFile(t, t.TempDir(), size)
	for _, tc := range []struct {
		s          Spec
		bytes, ops int64
	}{
		{Spec{Op: OpRead, IODepth: 8}, size, 11},
		{Spec{Op: OpRead, IODepth: 4, BlockSize: 4096}, size, (size + 4095) / 4096},
		{Spec{Op: OpRead, IODepth: 16, Bytes: 5<<20 + 7}, 5<<20 + 7, 6},
		{Spec{Op: OpRead, IODepth: 3, Bytes: 25 << 20, Loop: true}, 25 << 20, 27}, // 11 per pass, the 11th short
		{Spec{Op: OpRandRead, IODepth: 32, Bytes: 1 << 20}, 1 << 20, 256},
	} {
		s := tc.s
		s.Path = path
		r := mustRun(t, s)
		if r.Bytes != tc.bytes || r.Ops != tc.ops || r.IODepth != s.IODepth {
			t.Errorf("%+v: %d bytes in %d ops at iodepth %d; want %d bytes in %d ops", tc.s, r.Bytes, r.Ops, r.IODepth, tc.bytes, tc.ops)
		}
		if l := r.Latency; !(0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max) {
			t.Errorf("%+v: latency %+v", tc.s, l)
		}
	}
}

// TestRunIOPS paces requests: 21 requests at 100 per second take 200 ms at
// least (the first is due at once), and a job stopped by its duration does
// not run requests faster to catch up.
func TestRunIOPS(t *testing.T) {
	t.Parallel()
	path := testFile(t, t.TempDir(), 1<<20)
	r := mustRun(t, Spec{Path: path, Op: OpRandRead, IOPS: 100, Bytes: 21 * 4096})
	if r.Ops != 21 || r.Elapsed < 200*time.Millisecond {
		t.Errorf("21 requests at 100 IOPS: %d ops in %v; want 21 in 200ms or more", r.Ops, r.Elapsed)
	}
	if r.Response == nil || r.Response.Max < r.Latency.Max || r.Response.P50 < r.Latency.P50 {
		t.Errorf("paced job: response %+v must be reported and never below service latency %+v", r.Response, r.Latency)
	}
	if u := mustRun(t, Spec{Path: path, Op: OpRandRead, Bytes: 4096}); u.Response != nil {
		t.Errorf("unpaced job reports a response time %+v", u.Response)
	}
	r = mustRun(t, Spec{Path: path, Op: OpRandRead, IOPS: 50, IODepth: 4, Duration: 300 * time.Millisecond})
	if r.Ops < 1 || r.Ops > 16 {
		t.Errorf("300ms at 50 IOPS: %d ops; want 15 (one due at 0ms, none past the deadline)", r.Ops)
	}
}

// TestRunKeepLatencies: with KeepLatencies the result holds one service
// time per request, none above the maximum and as many as Ops; without it,
// none.
func TestRunKeepLatencies(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, depth := range []int{1, 4} {
		r := mustRun(t, Spec{Path: path, Op: OpRandRead, Bytes: 64 << 10, IODepth: depth, KeepLatencies: true})
		if int64(len(r.Latencies)) != r.Ops || r.Ops != 16 {
			t.Errorf("depth %d: %d latencies for %d ops; want 16 each", depth, len(r.Latencies), r.Ops)
		}
		for _, us := range r.Latencies {
			if us <= 0 || us > r.Latency.Max {
				t.Errorf("depth %d: latency %g µs outside (0, max %g]", depth, us, r.Latency.Max)
			}
		}
	}
	if r := mustRun(t, Spec{Path: path, Op: OpRandRead, Bytes: 64 << 10}); r.Latencies != nil {
		t.Errorf("latencies kept without KeepLatencies: %v", r.Latencies)
	}
}

// TestRunFsyncEvery counts the fdatasync calls of a writer that syncs
// every 1 MiB.
func TestRunFsyncEvery(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "w")
	r := mustRun(t, Spec{Path: path, Op: OpWrite, Create: true, Bytes: 4<<20 + 4096, BlockSize: 256 << 10, FsyncEvery: 1 << 20})
	if r.Fsyncs != 4 || r.Bytes != 4<<20+4096 {
		t.Errorf("%d bytes with --fsync-every 1MiB: %d fsyncs; want 4", r.Bytes, r.Fsyncs)
	}
}

// TestRunDirectReadUnalignedFile reads a file whose size is not a multiple
// of 4096 with O_DIRECT: the last read is short and must not fail.
func TestRunDirectReadUnalignedFile(t *testing.T) {
	t.Parallel()
	const size = 3*4096 + 100
	path := testFile(t, diskDir(t), size)
	skipIfNoDirect(t, path)
	for _, tc := range []struct {
		s          Spec
		bytes, ops int64
	}{
		{Spec{BlockSize: 4096}, size, 4},
		{Spec{}, size, 1},
		{Spec{BlockSize: 8192, Offset: 4096}, size - 4096, 2},
		{Spec{BlockSize: 4096, Bytes: 5000}, 8192, 2},                      // rounded up to 4096
		{Spec{BlockSize: 4096, Loop: true, Bytes: 3 * size}, 3 * size, 12}, // short read ends each pass
	} {
		s := tc.s
		s.Path, s.Op, s.Direct = path, OpRead, true
		r, err := Run(t.Context(), s)
		if err != nil {
			t.Fatalf("%+v: %v", tc.s, err)
		}
		if r.Bytes != tc.bytes || r.Ops != tc.ops {
			t.Errorf("%+v: %d bytes in %d ops; want %d in %d", tc.s, r.Bytes, r.Ops, tc.bytes, tc.ops)
		}
	}
}

func TestAlignedBuffer(t *testing.T) {
	t.Parallel()
	for _, n := range []int{4096, 1 << 20, 3 * 4096} {
		b := alignedBuffer(n)
		if len(b) != n || cap(b) != n {
			t.Errorf("alignedBuffer(%d): len %d cap %d", n, len(b), cap(b))
		}
		if p := uintptr(unsafe.Pointer(unsafe.SliceData(b))); p%DirectAlign != 0 {
			t.Errorf("alignedBuffer(%d) starts at %#x", n, p)
		}
	}
}

// TestRunRandReadStaysInRegion drops a file from the cache, reads randomly
// in a region of it and checks with mincore that only pages inside the
// region came into the cache (randread turns readahead off).
func TestRunRandReadStaysInRegion(t *testing.T) {
	t.Parallel()
	pg := int64(os.Getpagesize())
	path := testFile(t, diskDir(t), int(64*pg))
	if err := dropCache(path); err != nil {
		t.Fatal(err)
	}
	n := countTrue(resident(t, path))
	testkit.Need(t, n == 0, "filesystem keeps %d pages of %s cached after POSIX_FADV_DONTNEED; cannot observe reads", n, path)

	off, span := 16*pg, 16*pg
	r := mustRun(t, Spec{Path: path, Op: OpRandRead, Offset: off, Span: span, Bytes: 400 * 4096, Seed: 1})
	if r.Bytes != 400*4096 || r.Ops != 400 || r.BlockSize != 4096 {
		t.Errorf("%d bytes, %d ops of %d; want 400 ops of 4096", r.Bytes, r.Ops, r.BlockSize)
	}
	in := resident(t, path)
	for i, v := range in {
		if p := int64(i) * pg; v && (p < off || p >= off+span) {
			t.Errorf("page %d (offset %d) is cached: randread went outside [%d, %d)", i, p, off, off+span)
		}
	}
	if n := countTrue(in[off/pg : (off+span)/pg]); n == 0 {
		t.Errorf("no page of the region [%d, %d) is cached after 400 reads", off, off+span)
	}
}

func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// TestRunRandReadWholeBlocks reads randomly in a region of 10.5 blocks and
// asks the page cache (mincore) which pages were read: every page of the
// 10 whole blocks, and not the page of the odd half block or anything
// outside — an unaligned offset would touch two pages, and one drawn past
// the last whole block would touch the half block's page.
func TestRunRandReadWholeBlocks(t *testing.T) {
	t.Parallel()
	pg := int64(os.Getpagesize())
	path := testFile(t, diskDir(t), int(64*pg))
	if err := dropCache(path); err != nil {
		t.Fatal(err)
	}
	n := countTrue(resident(t, path))
	testkit.Need(t, n == 0, "filesystem keeps %d pages of %s cached after POSIX_FADV_DONTNEED; cannot observe reads", n, path)

	off, span := 2*pg, 10*pg+pg/2
	r := mustRun(t, Spec{Path: path, Op: OpRandRead, BlockSize: pg, Offset: off, Span: span, Bytes: 1000 * pg, Seed: 42})
	if r.Bytes != 1000*pg || r.Ops != 1000 {
		t.Errorf("%d bytes in %d ops; want 1000 ops of %d", r.Bytes, r.Ops, pg)
	}
	in := resident(t, path)
	for i, v := range in {
		whole := int64(i) >= off/pg && int64(i) < off/pg+10
		if v != whole {
			t.Errorf("page %d (offset %d) cached %v; want %v (whole blocks are pages %d..%d)", i, int64(i)*pg, v, whole, off/pg, off/pg+9)
		}
	}
}

func TestRunDropCache(t *testing.T) {
	t.Parallel()
	path := testFile(t, diskDir(t), 1<<20)
	mustRun(t, Spec{Path: path, Op: OpRead}) // now cached
	testkit.Need(t, countTrue(resident(t, path)) > 0, "pages of %s, just read, are not in the page cache; cannot observe dropping them", path)
	// A zero-byte budget is not possible, so read one block and check that
	// everything else was dropped before it.
	r := mustRun(t, Spec{Path: path, Op: OpRead, DropCache: true, BlockSize: 4096, Bytes: 4096})
	if r.Bytes != 4096 {
		t.Fatalf("read %d bytes; want 4096", r.Bytes)
	}
	in := resident(t, path)
	// Readahead may bring in the first few hundred KiB; the tail must be cold.
	tail := in[len(in)*3/4:]
	if n := countTrue(tail); n != 0 {
		t.Errorf("%d of the last %d pages still cached after --drop-cache", n, len(tail))
	}
}

func TestRunWrite(t *testing.T) {
	t.Parallel()
	dir := diskDir(t)
	path := filepath.Join(dir, "w")

	r := mustRun(t, Spec{Path: path, Op: OpWrite, Create: true, Sync: true, Bytes: 3<<20 + 7, Seed: 9})
	if r.Bytes != 3<<20+7 || r.Ops != 4 {
		t.Errorf("wrote %d bytes in %d ops; want %d in 4", r.Bytes, r.Ops, 3<<20+7)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3<<20+7 {
		t.Fatalf("file has %d bytes; want %d", len(b), 3<<20+7)
	}
	if bytes.Count(b[:1<<20], []byte{0}) > 1<<14 {
		t.Errorf("written data looks like zeros, which some storage compresses away")
	}

	// Size bounds the region; Offset skips the head.
	r = mustRun(t, Spec{Path: path, Op: OpWrite, Size: 2 << 20, Offset: 4096, BlockSize: 64 << 10})
	if want := int64(2<<20 - 4096); r.Bytes != want {
		t.Errorf("wrote %d bytes; want %d", r.Bytes, want)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 2<<20 {
		t.Errorf("size after --size 2MiB: %v, %v", fi.Size(), err)
	}

	// Loop over a bounded region.
	r = mustRun(t, Spec{Path: path, Op: OpWrite, Span: 1 << 20, Loop: true, Bytes: 3 << 20})
	if r.Bytes != 3<<20 || r.Ops != 3 {
		t.Errorf("looped write: %d bytes in %d ops; want 3 MiB in 3", r.Bytes, r.Ops)
	}

	// Without Create a missing file is an I/O error, not a usage error.
	_, err = Run(t.Context(), Spec{Path: filepath.Join(dir, "missing"), Op: OpWrite, Bytes: 1})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("write to a missing file without Create: %v; want ErrNotExist", err)
	}
}

func TestRunDirectWrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(diskDir(t), "w")
	skipIfNoDirect(t, path)
	r, err := Run(t.Context(), Spec{Path: path, Op: OpWrite, Direct: true, Sync: true, Bytes: 1 << 20, BlockSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if r.Bytes != 1<<20 || r.Ops != 16 {
		t.Errorf("wrote %d bytes in %d ops; want 1 MiB in 16", r.Bytes, r.Ops)
	}
}

func TestRunDuration(t *testing.T) {
	t.Parallel()
	path := testFile(t, t.TempDir(), 64<<10)
	const d = 100 * time.Millisecond
	r := mustRun(t, Spec{Path: path, Op: OpRead, BlockSize: 4096, Loop: true, Duration: d})
	// The job stops at the first request to end after the deadline, so it
	// runs at least d; the upper bound only catches "never stopped".
	if r.Elapsed < d || r.Elapsed > d+time.Minute {
		t.Errorf("elapsed %v for a %v job", r.Elapsed, d)
	}
	if r.Ops < 1 || r.Bytes != r.Ops*4096 {
		t.Errorf("%d bytes in %d ops of 4096", r.Bytes, r.Ops)
	}
}

func TestRunRateLimit(t *testing.T) {
	t.Parallel()
	path := testFile(t, t.TempDir(), 1<<20)
	const rate = 8 << 20 // 1 MiB takes 125ms
	r := mustRun(t, Spec{Path: path, Op: OpRead, BlockSize: 64 << 10, RateLimit: rate})
	if r.Bytes != 1<<20 {
		t.Fatalf("read %d bytes; want 1 MiB", r.Bytes)
	}
	// The limiter lets a request go only once the bytes including it fit
	// under the rate: the rate can be undershot, never overshot.
	if min := 125 * time.Millisecond; r.Elapsed < min {
		t.Errorf("1 MiB at %d B/s took %v; want at least %v", rate, r.Elapsed, min)
	}
	if r.BytesPerSec > rate {
		t.Errorf("%.0f B/s; want at most %d", r.BytesPerSec, rate)
	}

	// Stopped by a duration, the job does not squeeze in a last request
	// that would break the rate.
	const d = 300 * time.Millisecond
	r = mustRun(t, Spec{Path: path, Op: OpRead, BlockSize: 256 << 10, Loop: true, RateLimit: rate, Duration: d})
	if r.BytesPerSec > rate || r.Elapsed < d || r.Elapsed > d+time.Minute {
		t.Errorf("%d bytes at %d B/s for %v: %.0f B/s in %v", r.Bytes, rate, d, r.BytesPerSec, r.Elapsed)
	}
}

func TestRunCancel(t *testing.T) {
	t.Parallel()
	path := testFile(t, t.TempDir(), 64<<10)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r, err := Run(ctx, Spec{Path: path, Op: OpRead, Loop: true})
	if err != nil || r.Ops != 0 || r.Bytes != 0 {
		t.Errorf("cancelled before start: %+v, %v; want no I/O and no error", r, err)
	}

	// A job sleeping for its rate limit (a 4k request at 1 B/s waits more
	// than an hour) wakes up on cancellation and returns what it did.
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan struct{})
	var got Result
	go func() {
		defer close(done)
		got, err = Run(ctx, Spec{Path: path, Op: OpRead, BlockSize: 4096, Loop: true, RateLimit: 1})
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Run did not return within a minute of cancellation")
	}
	if err != nil || got.Ops != 0 {
		t.Errorf("cancelled while rate-limited: %+v, %v; want no request and no error", got, err)
	}
}

func TestRunSpecErrorsAfterOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := testFile(t, dir, 8192)
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s     Spec
		field string
	}{
		{Spec{Path: dir, Op: OpRead}, "Path"},
		{Spec{Path: "/dev/null", Op: OpRead}, "Path"},
		{Spec{Path: empty, Op: OpRead}, "Offset"},
		{Spec{Path: path, Op: OpRead, Offset: 8192}, "Offset"},
		{Spec{Path: path, Op: OpRandRead, Offset: 4096, BlockSize: 8192}, "Span"},
		{Spec{Path: path, Op: OpWrite}, "Bytes"},
		{Spec{Path: path, Op: OpWrite, Loop: true, Duration: time.Second}, "Loop"},
	} {
		_, err := Run(t.Context(), tc.s)
		var se *SpecError
		if !errors.As(err, &se) || se.Field != tc.field {
			t.Errorf("Run(%+v) = %v; want a *SpecError for %s", tc.s, err, tc.field)
		}
	}
	// Nothing was written by the refused writes.
	if b, _ := os.ReadFile(path); len(b) != 8192 {
		t.Errorf("%s has %d bytes after refused jobs", path, len(b))
	}
}

func TestLatencyRecorder(t *testing.T) {
	t.Parallel()
	l := newLatencyRecorder()
	if got := l.latency(); got != (Latency{}) {
		t.Errorf("empty: %+v", got)
	}
	for i := 1; i <= 1000; i++ {
		l.record(time.Duration(i) * time.Microsecond)
	}
	l.record(3 * time.Hour) // beyond the histogram: counted at its top
	got := l.latency()
	near := func(v, want float64) bool { return v >= want*0.999 && v <= want*1.001 }
	// 1001 values: the p-th percentile is value number round(p/100*1001).
	if !near(got.P50, 501) || !near(got.P90, 901) || !near(got.P99, 991) || !near(got.P999, 1000) || got.Max != 3*3600e6 {
		t.Errorf("latency %+v; want p50 501, p90 901, p99 991, p99.9 1000 (each within 0.1%%), max 1.08e10", got)
	}
}

// TestRunRandWriteStaysInRegion writes at random into the middle of a file
// and reads the file back: every changed byte lies in the region, whole
// blocks were written, and the file kept its size.
func TestRunRandWriteStaysInRegion(t *testing.T) {
	t.Parallel()
	path := testFile(t, diskDir(t), 64*4096)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off, span := int64(16*4096), int64(16*4096)
	r := mustRun(t, Spec{Path: path, Op: OpRandWrite, Direct: true, Offset: off, Span: span, Bytes: 64 * 4096, Seed: 3})
	if r.Bytes != 64*4096 || r.Ops != 64 || r.BlockSize != 4096 || r.Op != OpRandWrite {
		t.Errorf("%s: %d bytes, %d ops of %d; want 64 ops of 4096", r.Op, r.Bytes, r.Ops, r.BlockSize)
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("file size %d after randwrite, was %d", len(after), len(before))
	}
	changed := 0
	for b := int64(0); b < int64(len(after))/4096; b++ {
		blk := func(x []byte) []byte { return x[b*4096 : (b+1)*4096] }
		if bytes.Equal(blk(before), blk(after)) {
			continue
		}
		changed++
		if p := b * 4096; p < off || p >= off+span {
			t.Errorf("block at %d changed: randwrite went outside [%d, %d)", p, off, off+span)
		}
	}
	// 64 draws from 16 blocks leave one untouched with odds 16·(15/16)^64 ≈ 0.3%.
	if changed < 12 {
		t.Errorf("%d of the region's 16 blocks changed after 64 random writes", changed)
	}
	if err := (Spec{Path: path, Op: OpRandWrite, Loop: true}).Validate(); err == nil {
		t.Error("randwrite with Loop validated")
	}
}
