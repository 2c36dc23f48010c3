package workload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// RunThreads runs one copy of s per cgroup v1 tasks file in tasks, each on
// an OS thread of its own that first joins its cgroup by writing its
// thread id to that file: many streams, each charged to a cgroup of its
// own, for the cost of one process. (cgroup v1 lets the threads of one
// process be in different cgroups; v2 does not outside threaded subtrees.)
//
// Copy i uses the region s.Offset + (i mod k)×s.Span, where k regions of
// s.Span fit between s.Offset and the end of the file or device: s.Span is
// required, and s.IODepth must be at most 1 (a copy's requests all come
// from its own thread). The result adds the copies up: Bytes, Ops and
// Fsyncs summed, latencies merged, Start the earliest, End the latest.
// A copy that cannot join its cgroup or fails its I/O ends the run; the
// error names the tasks file or the copy.
func RunThreads(ctx context.Context, s Spec, tasks []string) (Result, error) {
	if err := s.Validate(); err != nil {
		return Result{}, err
	}
	switch {
	case len(tasks) == 0:
		return Result{}, errors.New("run threads: no cgroup tasks files")
	case s.Span <= 0:
		return Result{}, &SpecError{Field: "Span", Value: s.Span, Reason: "must be set to run one copy per thread (each copy takes a region of Span bytes)"}
	case s.IODepth > 1:
		return Result{}, &SpecError{Field: "IODepth", Value: s.IODepth, Reason: "must be 1 to run one copy per thread (a copy's requests come from its own thread)"}
	}
	size, err := fileSize(s.Path)
	if err != nil {
		return Result{}, err
	}
	k := max(1, (size-s.Offset)/s.Span)

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		mu        sync.Mutex
		total     Result
		lat, resp = newLatencyRecorder(), newLatencyRecorder()
		errs      = make([]error, len(tasks))
		wg        sync.WaitGroup
	)
	for i, file := range tasks {
		c := s
		c.Offset = s.Offset + int64(i)%k*s.Span
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Never unlocked: the thread ends with the goroutine, so no
			// other goroutine runs on a thread in this copy's cgroup (and
			// the runtime starts new threads from its template thread, not
			// from a locked one).
			runtime.LockOSThread()
			r, l, rs, err := runCopy(ctx, c, file)
			if err != nil {
				errs[i] = err
				stop()
			}
			if l == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			addResult(&total, r)
			lat.merge(l)
			resp.merge(rs)
		}()
	}
	wg.Wait()
	total.Op, total.Path, total.BlockSize, total.IODepth = s.Op, s.Path, s.blockSize(), 1
	lat.keep = s.KeepLatencies
	total.Latency, total.Latencies = lat.latency(), lat.kept()
	if s.IOPS > 0 {
		l := resp.latency()
		total.Response = &l
	}
	total.Elapsed = total.End.Sub(total.Start)
	if total.Elapsed > 0 {
		total.BytesPerSec = float64(total.Bytes) / total.Elapsed.Seconds()
	}
	return total, errors.Join(errs...)
}

// runCopy joins the cgroup of the tasks file with the calling thread and
// runs s on it.
func runCopy(ctx context.Context, s Spec, tasks string) (Result, *latencyRecorder, *latencyRecorder, error) {
	tid := strconv.Itoa(unix.Gettid())
	if err := os.WriteFile(tasks, []byte(tid), 0); err != nil {
		return Result{}, nil, nil, fmt.Errorf("thread %s joins the cgroup of %s: %w", tid, tasks, err)
	}
	j, err := openJob(s)
	if err != nil {
		return Result{}, nil, nil, err
	}
	defer j.f.Close()
	r, l, rs, err := j.runRecorded(ctx)
	if err != nil {
		err = fmt.Errorf("copy in %s: %w", tasks, err)
	}
	return r, l, rs, err
}

// addResult adds r's counts and time span to t.
func addResult(t *Result, r Result) {
	t.Bytes += r.Bytes
	t.Ops += r.Ops
	t.Fsyncs += r.Fsyncs
	if t.Start.IsZero() || r.Start.Before(t.Start) {
		t.Start = r.Start
	}
	if r.End.After(t.End) {
		t.End = r.End
	}
}

// fileSize is the size of a regular file or block device.
func fileSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", path, err)
	}
	return n, nil
}

// ReadTasksList reads the file of --threads-from: one cgroup v1 tasks file
// per line; blank lines and lines starting with # are skipped.
func ReadTasksList(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s lists no cgroup tasks files", path)
	}
	return out, nil
}
