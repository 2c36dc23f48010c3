package workload

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"time"
	"unsafe"

	"github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
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

// Result is what a job did. Elapsed runs from Start (just before the first
// request, after opening and dropping the cache) to End (after the last
// request and, with Sync, after fdatasync).
type Result struct {
	Op          Op            `json:"op"`
	Path        string        `json:"path"`
	BlockSize   int64         `json:"block_size"`
	Bytes       int64         `json:"bytes"` // bytes transferred
	Ops         int64         `json:"ops"`   // read or write calls made
	Elapsed     time.Duration `json:"elapsed_ns"`
	BytesPerSec float64       `json:"bytes_per_sec"`
	Latency     Latency       `json:"latency_us"`
	Start       time.Time     `json:"start"`
	End         time.Time     `json:"end"`
}

// Run opens s.Path and runs the job until Bytes, Duration, the end of the
// region (without Loop) or ctx stops it. Cancellation is not an error: Run
// returns what was done so far and nil. On an I/O error Run returns what was
// done before it along with the error. Problems with s itself are
// *SpecError (see Spec.Validate), also those only visible after opening
// Path, such as an offset beyond the end of the file.
func Run(ctx context.Context, s Spec) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	j, err := openJob(s)
	if err != nil {
		return Result{}, err
	}
	defer j.f.Close()
	return j.run(ctx)
}

// job is an opened Spec.
type job struct {
	s          Spec
	f          *os.File
	fd         int
	bs         int64
	start, end int64 // region; end < 0: unbounded (write to a growing file)
	buf        []byte
	rng        *rand.Rand
}

func openJob(s Spec) (*job, error) {
	bad := func(field string, v any, format string, a ...any) error {
		return &SpecError{Field: field, Value: v, Reason: fmt.Sprintf(format, a...)}
	}
	flags := os.O_RDONLY
	if s.Op == OpWrite {
		flags = os.O_WRONLY
		if s.Create {
			flags |= os.O_CREATE
		}
	}
	if s.Direct {
		flags |= unix.O_DIRECT
	}
	f, err := os.OpenFile(s.Path, flags, 0o644)
	if errors.Is(err, unix.EISDIR) {
		return nil, bad("Path", strconv.Quote(s.Path), "is a directory, not a regular file or block device")
	}
	if err != nil {
		return nil, err // *os.PathError names the path and the operation
	}
	j := &job{s: s, f: f, fd: int(f.Fd()), bs: s.blockSize(), start: s.Offset}
	if err := j.setup(bad); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

func (j *job) setup(bad func(string, any, string, ...any) error) error {
	s := j.s
	fi, err := j.f.Stat()
	if err != nil {
		return err
	}
	mode := fi.Mode()
	block := mode&os.ModeDevice != 0 && mode&os.ModeCharDevice == 0
	if !mode.IsRegular() && !block {
		return bad("Path", strconv.Quote(s.Path), "is a %s, not a regular file or block device", modeName(mode))
	}
	if s.Size > 0 {
		if block {
			return bad("Size", s.Size, "applies to regular files only, and %s is a block device", s.Path)
		}
		if err := j.f.Truncate(s.Size); err != nil {
			return err
		}
	}
	// Seek to the end gives the size of regular files and block devices alike.
	size, err := j.f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}

	j.end = size
	if s.Span > 0 && s.Offset+s.Span < size {
		j.end = s.Offset + s.Span
	}
	if s.Op == OpWrite && !block {
		switch {
		case s.Span > 0:
			j.end = s.Offset + s.Span
		case s.Size > 0:
			j.end = s.Size
		default:
			j.end = -1
		}
	}
	if s.Direct && s.Op == OpWrite && j.end > 0 {
		// A block device's size is a multiple of 512, maybe not of 4096.
		j.end -= j.end % DirectAlign
	}
	switch {
	case j.end < 0 && s.Loop:
		return bad("Loop", s.Loop, "needs a bounded region: give a span or a size")
	case j.end < 0 && s.Bytes == 0 && s.Duration == 0:
		return bad("Bytes", s.Bytes, "limit needed: writing to a regular file without a byte count, duration, span or size would fill the disk")
	case j.end >= 0 && j.start >= j.end:
		return bad("Offset", s.Offset, "leaves nothing to %s: %s has %d bytes", s.Op, s.Path, size)
	case s.Op == OpRandRead && j.end-j.start < j.bs:
		return bad("Span", s.Span, "leaves a region of %d bytes, smaller than the block size %d", j.end-j.start, j.bs)
	}

	if s.DropCache {
		n := int64(0) // to the end of the file
		if j.end >= 0 {
			n = j.end - j.start
		}
		if err := unix.Fadvise(j.fd, j.start, n, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("drop cache of %s: %w", s.Path, err)
		}
	}
	if s.Op == OpRandRead {
		// No readahead: each request reads its block and nothing around it.
		if err := unix.Fadvise(j.fd, 0, 0, unix.FADV_RANDOM); err != nil {
			return fmt.Errorf("fadvise random %s: %w", s.Path, err)
		}
	}

	seed := s.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	j.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	j.buf = alignedBuffer(int(roundUp(j.bs, DirectAlign)))
	if s.Op == OpWrite {
		var key [32]byte
		binary.LittleEndian.PutUint64(key[:], seed)
		_, _ = rand.NewChaCha8(key).Read(j.buf) // never fails
	}
	return nil
}

func modeName(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "directory"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeNamedPipe != 0:
		return "named pipe"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}

func (j *job) run(ctx context.Context) (Result, error) {
	s := j.s
	lat := newLatencyRecorder()
	var bytes, ops int64
	start := time.Now()
	var deadline time.Time
	if s.Duration > 0 {
		deadline = start.Add(s.Duration)
	}
	finish := func(err error) (Result, error) {
		if err == nil && s.Op == OpWrite && s.Sync {
			if e := fdatasync(j.fd); e != nil {
				err = fmt.Errorf("fdatasync %s: %w", s.Path, e)
			}
		}
		end := time.Now()
		r := Result{
			Op: s.Op, Path: s.Path, BlockSize: j.bs,
			Bytes: bytes, Ops: ops, Elapsed: end.Sub(start),
			Latency: lat.latency(), Start: start, End: end,
		}
		if r.Elapsed > 0 {
			r.BytesPerSec = float64(bytes) / r.Elapsed.Seconds()
		}
		return r, err
	}

	var nblocks int64
	if s.Op == OpRandRead {
		nblocks = (j.end - j.start) / j.bs
	}
	pos := j.start
	for {
		if ctx.Err() != nil || s.Bytes > 0 && bytes >= s.Bytes {
			return finish(nil)
		}
		off, n := pos, j.bs
		if s.Op == OpRandRead {
			off = j.start + j.rng.Int64N(nblocks)*j.bs
		} else {
			if j.end >= 0 && pos >= j.end {
				if !s.Loop {
					return finish(nil)
				}
				pos, off = j.start, j.start
			}
			if j.end >= 0 {
				n = min(n, j.end-pos)
			}
		}
		if s.Bytes > 0 {
			n = min(n, s.Bytes-bytes)
		}
		if s.Direct {
			// A no-op for writes, whose lengths Validate keeps aligned. A
			// read past end of file returns what is there.
			n = roundUp(n, DirectAlign)
		}

		if !j.pace(ctx, start, deadline, bytes, n) {
			return finish(nil)
		}
		if ctx.Err() != nil {
			return finish(nil)
		}

		t := time.Now()
		var got int
		var err error
		if s.Op == OpWrite {
			got, err = pwrite(j.fd, j.buf[:n], off)
		} else {
			got, err = pread(j.fd, j.buf[:n], off)
		}
		now := time.Now()
		if err != nil {
			return finish(fmt.Errorf("%s %s at offset %d, %d bytes: %w", s.Op, s.Path, off, n, err))
		}
		lat.record(now.Sub(t))
		ops++
		bytes += int64(got)

		switch {
		case s.Op == OpWrite && got == 0:
			return finish(fmt.Errorf("write %s at offset %d: %w", s.Path, off, io.ErrShortWrite))
		case s.Op == OpRead && int64(got) < n:
			// End of file: the pass is over (the file may also have shrunk).
			if !s.Loop {
				return finish(nil)
			}
			if got == 0 && off == j.start {
				return finish(fmt.Errorf("read %s: nothing at offset %d any more", s.Path, off))
			}
			pos = j.end // the next round starts again at the region's start
		default:
			pos = off + int64(got)
		}

		if !deadline.IsZero() && !now.Before(deadline) {
			return finish(nil)
		}
	}
}

// pace waits until a request of n more bytes keeps the job at or below
// RateLimit: until bytes+n bytes at the limit would have taken since start.
// Paying before the request, not after, means that whenever the job stops
// it has moved at most RateLimit*Elapsed bytes. It returns false when the
// wait would pass the deadline, after sleeping until the deadline.
func (j *job) pace(ctx context.Context, start, deadline time.Time, bytes, n int64) bool {
	if j.s.RateLimit <= 0 {
		return true
	}
	due := start.Add(time.Duration(float64(bytes+n) / float64(j.s.RateLimit) * float64(time.Second)))
	if !deadline.IsZero() && due.After(deadline) {
		sleep(ctx, time.Until(deadline))
		return false
	}
	sleep(ctx, time.Until(due))
	return true
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }

// alignedBuffer returns n bytes starting at a DirectAlign boundary, as
// O_DIRECT requires. Go's heap objects do not move, so aligning a slice into
// an over-allocated array is enough and the GC still owns the memory.
func alignedBuffer(n int) []byte {
	b := make([]byte, n+DirectAlign)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (DirectAlign - 1))
	return b[skip : skip+n : skip+n]
}

func pread(fd int, p []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, p, off)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// pwrite writes all of p unless an error or a zero-length write stops it.
func pwrite(fd int, p []byte, off int64) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Pwrite(fd, p[done:], off+int64(done))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		done += max(n, 0)
		if err != nil || n == 0 {
			return done, err
		}
	}
	return done, nil
}

func fdatasync(fd int) error {
	for {
		err := unix.Fdatasync(fd)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// latencyRecorder collects request latencies: an HDR histogram for the
// percentiles and the exact maximum beside it.
type latencyRecorder struct {
	h   *hdrhistogram.Histogram
	max time.Duration
}

// maxTrackedLatency is the histogram's top; slower requests count as this.
const maxTrackedLatency = time.Hour

func newLatencyRecorder() *latencyRecorder {
	// Nanoseconds, so a page-cache hit of under a microsecond is not a zero.
	return &latencyRecorder{h: hdrhistogram.New(1, int64(maxTrackedLatency), 3)}
}

func (l *latencyRecorder) record(d time.Duration) {
	l.max = max(l.max, d)
	_ = l.h.RecordValue(int64(min(max(d, 1), maxTrackedLatency))) // in range: cannot fail
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
