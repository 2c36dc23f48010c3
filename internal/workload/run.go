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
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Result is what a job did. Elapsed runs from Start (just before the first
// request, after opening and dropping the cache) to End (after the last
// request and, with Sync, after fdatasync).
type Result struct {
	Op          Op            `json:"op"`
	Path        string        `json:"path"`
	BlockSize   int64         `json:"block_size"`
	IODepth     int           `json:"iodepth"`
	Bytes       int64         `json:"bytes"`            // bytes transferred
	Ops         int64         `json:"ops"`              // read or write calls made
	Fsyncs      int64         `json:"fsyncs,omitempty"` // FsyncEvery's fdatasync calls
	Elapsed     time.Duration `json:"elapsed_ns"`
	BytesPerSec float64       `json:"bytes_per_sec"`
	Latency     Latency       `json:"latency_us"` // each request's service time, from its issue
	// Response is, with IOPS, each request's time from when it was due:
	// a stall delays every request behind it (no coordinated omission).
	Response *Latency `json:"response_us,omitempty"`
	// Latencies are, with Spec.KeepLatencies, every request's service
	// time in µs, in order of completion per worker.
	Latencies []float64 `json:"latencies_us,omitempty"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
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
	if s.Op.writes() {
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
	if s.Direct && s.Op.writes() && j.end > 0 {
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
	case s.Op.random() && j.end-j.start < j.bs:
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
	if s.Op.random() {
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
	if s.Op.writes() {
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
	r, _, _, err := j.runRecorded(ctx)
	return r, err
}

// runRecorded is run that also returns the latency recorders (service
// time, response time), for RunThreads to merge.
func (j *job) runRecorded(ctx context.Context) (Result, *latencyRecorder, *latencyRecorder, error) {
	s := j.s
	depth := max(1, s.IODepth)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	recs := make([]*latencyRecorder, depth)
	resps := make([]*latencyRecorder, depth)
	errs := make([]error, depth)
	var wg sync.WaitGroup
	// Each worker needs its own aligned buffer; worker 0 reuses j.buf (a
	// write's pseudo-random data is the same for all). All are filled
	// before any worker reads into j.buf, and before the clock starts: at
	// a deep queue of large blocks this takes long enough to skew a short
	// job's rate.
	bufs := make([][]byte, depth)
	bufs[0] = j.buf
	for w := 1; w < depth; w++ {
		bufs[w] = alignedBuffer(len(j.buf))
		copy(bufs[w], j.buf)
	}
	for w := range depth {
		recs[w], resps[w] = newLatencyRecorder(), newLatencyRecorder()
		recs[w].keep = s.KeepLatencies
	}
	st := &runState{pos: j.start, start: time.Now()}
	if s.Op.random() {
		st.nblocks = (j.end - j.start) / j.bs
	}
	if s.Duration > 0 {
		st.deadline = st.start.Add(s.Duration)
	}
	if depth == 1 {
		// On the caller's goroutine: a caller locked to its OS thread
		// (RunThreads) issues every request from that thread.
		errs[0] = j.worker(ctx, st, recs[0], resps[0], bufs[0])
	} else {
		for w := range depth {
			buf := bufs[w]
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[w] = j.worker(ctx, st, recs[w], resps[w], buf)
				if errs[w] != nil {
					stop() // the first error ends the job
				}
			}()
		}
		wg.Wait()
	}
	err := errors.Join(errs...)
	if err == nil && s.Op.writes() && s.Sync {
		if e := fdatasync(j.fd); e != nil {
			err = fmt.Errorf("fdatasync %s: %w", s.Path, e)
		}
	}
	end := time.Now()
	lat, resp := recs[0], resps[0]
	for w := 1; w < depth; w++ {
		lat.merge(recs[w])
		resp.merge(resps[w])
	}
	r := Result{
		Op: s.Op, Path: s.Path, BlockSize: j.bs, IODepth: depth,
		Bytes: st.bytes, Ops: st.ops, Fsyncs: st.fsyncs, Elapsed: end.Sub(st.start),
		Latency: lat.latency(), Latencies: lat.kept(), Start: st.start, End: end,
	}
	if s.IOPS > 0 {
		l := resp.latency()
		r.Response = &l
	}
	if r.Elapsed > 0 {
		r.BytesPerSec = float64(st.bytes) / r.Elapsed.Seconds()
	}
	return r, lat, resp, err
}

// runState is what the workers of one job share, under mu.
type runState struct {
	mu       sync.Mutex
	start    time.Time
	deadline time.Time // zero: none
	nblocks  int64     // randread: blocks in the region
	pos      int64     // sequential: next offset
	claimed  int64     // bytes of requests issued, less what came short
	// paceLag is how far RateLimit's schedule has been moved on: a job
	// held back (by a cap, a slow device) gets back at most RateCredit of
	// its rate, not everything it missed.
	paceLag time.Duration
	issued  int64 // requests issued (the IOPS schedule's index)
	bytes   int64 // bytes transferred
	ops     int64
	synced  int64 // bytes written when fdatasync last ran (FsyncEvery)
	fsyncs  int64
	done    bool
}

// claim picks the next request: its offset and length, the bytes claimed
// before it (for RateLimit) and when it is due (zero without IOPS). ok is
// false when the job is over.
func (j *job) claim(st *runState) (off, n, before int64, due time.Time, ok bool) {
	s := j.s
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done || s.Bytes > 0 && st.claimed >= s.Bytes {
		return 0, 0, 0, due, false
	}
	off, n = st.pos, j.bs
	if s.Op.random() {
		off = j.start + j.rng.Int64N(st.nblocks)*j.bs
	} else {
		if j.end >= 0 && st.pos >= j.end {
			if !s.Loop {
				return 0, 0, 0, due, false
			}
			st.pos, off = j.start, j.start
		}
		if j.end >= 0 {
			n = min(n, j.end-st.pos)
		}
	}
	if s.Bytes > 0 {
		n = min(n, s.Bytes-st.claimed)
	}
	if s.Direct {
		// A no-op for writes, whose lengths Validate keeps aligned. A
		// read past end of file returns what is there.
		n = roundUp(n, DirectAlign)
	}
	if !s.Op.random() {
		st.pos = off + n
	}
	if s.IOPS > 0 {
		due = st.start.Add(time.Duration(float64(st.issued) / s.IOPS * float64(time.Second)))
	}
	before = st.claimed
	st.claimed += n
	st.issued++
	return off, n, before, due, true
}

// worker issues requests one at a time until the job is over, ctx is done
// or a request fails.
func (j *job) worker(ctx context.Context, st *runState, lat, resp *latencyRecorder, buf []byte) error {
	s := j.s
	for {
		if ctx.Err() != nil {
			return nil
		}
		off, n, before, due, ok := j.claim(st)
		if !ok {
			return nil
		}
		if !j.pace(ctx, st, before, n) || !j.waitDue(ctx, st, due) {
			st.finish()
			return nil
		}
		if ctx.Err() != nil {
			return nil
		}
		t := time.Now()
		from := t
		if !due.IsZero() && due.Before(t) {
			// Late: the request waited since it was due (behind a slow
			// one, or for a free worker); that wait is response time too.
			from = due
		}
		var got int
		var err error
		if s.Op.writes() {
			got, err = pwrite(j.fd, buf[:n], off)
		} else {
			got, err = pread(j.fd, buf[:n], off)
		}
		now := time.Now()
		if err != nil {
			return fmt.Errorf("%s %s at offset %d, %d bytes: %w", s.Op, s.Path, off, n, err)
		}
		lat.record(now.Sub(t))
		if !due.IsZero() {
			resp.record(now.Sub(from))
		}
		syncNow, serr := j.account(st, off, n, int64(got))
		if serr != nil {
			return serr
		}
		if syncNow {
			if e := fdatasync(j.fd); e != nil {
				return fmt.Errorf("fdatasync %s: %w", s.Path, e)
			}
		}
		if !st.deadline.IsZero() && !now.Before(st.deadline) {
			st.finish()
			return nil
		}
	}
}

// account books a finished request. It ends the job at the end of a
// non-looping read, and says when a fdatasync is due (FsyncEvery).
func (j *job) account(st *runState, off, n, got int64) (syncNow bool, err error) {
	s := j.s
	st.mu.Lock()
	defer st.mu.Unlock()
	st.ops++
	st.bytes += got
	st.claimed -= n - got
	switch {
	case s.Op.writes() && got == 0:
		st.done = true
		return false, fmt.Errorf("write %s at offset %d: %w", s.Path, off, io.ErrShortWrite)
	case s.Op == OpRead && got < n:
		// End of file: the pass is over (the file may also have shrunk).
		if !s.Loop {
			st.done = true
			return false, nil
		}
		if got == 0 && off == j.start {
			st.done = true
			return false, fmt.Errorf("read %s: nothing at offset %d any more", s.Path, off)
		}
		st.pos = j.end // the next round starts again at the region's start
	}
	if s.FsyncEvery > 0 && st.bytes-st.synced >= s.FsyncEvery {
		st.synced = st.bytes
		st.fsyncs++
		return true, nil
	}
	return false, nil
}

// finish ends the job for every worker.
func (st *runState) finish() {
	st.mu.Lock()
	st.done = true
	st.mu.Unlock()
}

// waitDue sleeps until due (IOPS pacing). It returns false when due lies
// past the deadline, after sleeping until the deadline.
func (j *job) waitDue(ctx context.Context, st *runState, due time.Time) bool {
	if due.IsZero() {
		return true
	}
	if !st.deadline.IsZero() && due.After(st.deadline) {
		sleep(ctx, time.Until(st.deadline))
		return false
	}
	sleep(ctx, time.Until(due))
	return true
}

// RateCredit is the most of RateLimit's schedule a job behind it makes up
// at full speed: a paced job held back (a cap, a slow device) goes on at
// its rate with at most this much of it in a burst, as a token bucket
// does, not at full speed until it has moved everything it missed (which
// made a backup held back for a few seconds a greedy stream after).
const RateCredit = 100 * time.Millisecond

// pace waits until a request of n more bytes keeps the job at or below
// RateLimit: until bytes+n bytes at the limit would have taken since start
// (moved on by what the job fell behind beyond RateCredit). Paying before
// the request, not after, means that whenever the job stops it has moved
// at most RateLimit*Elapsed bytes. It returns false when the wait would
// pass the deadline, after sleeping until the deadline.
func (j *job) pace(ctx context.Context, st *runState, bytes, n int64) bool {
	if j.s.RateLimit <= 0 {
		return true
	}
	st.mu.Lock()
	due := st.start.Add(st.paceLag + time.Duration(float64(bytes+n)/float64(j.s.RateLimit)*float64(time.Second)))
	if behind := time.Since(due) - RateCredit; behind > 0 {
		st.paceLag += behind
		due = due.Add(behind)
	}
	deadline := st.deadline
	st.mu.Unlock()
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
