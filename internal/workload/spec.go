package workload

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
)

// Op is the kind of I/O a job issues.
type Op string

const (
	// OpRead reads the region sequentially, one block after the other.
	OpRead Op = "read"
	// OpWrite writes pseudo-random data over the region sequentially.
	OpWrite Op = "write"
	// OpRandRead reads blocks at random block-aligned offsets in the region.
	OpRandRead Op = "randread"
	// OpRandWrite writes pseudo-random data to blocks at random
	// block-aligned offsets in the region (a block device, or a regular
	// file's existing size or Size).
	OpRandWrite Op = "randwrite"
)

// writes reports whether o writes.
func (o Op) writes() bool { return o == OpWrite || o == OpRandWrite }

// random reports whether o picks its offsets at random.
func (o Op) random() bool { return o == OpRandRead || o == OpRandWrite }

const (
	// DefaultSeqBlockSize is the block size of read and write when none is given.
	DefaultSeqBlockSize = 1 << 20
	// DefaultRandBlockSize is the block size of randread when none is given.
	DefaultRandBlockSize = 4 << 10
	// DirectAlign is the alignment of the buffer, and of block size, offset,
	// span and size, under direct I/O. 4096 satisfies every logical block
	// size in use (512 and 4096).
	DirectAlign = 4096
	// MaxBlockSize bounds BlockSize; Linux moves at most 2 GiB - 4 KiB per call.
	MaxBlockSize = 1 << 30
)

// Spec describes one job: one file or block device, one request at a time
// (queue depth 1) unless IODepth says more. The zero value of every field except Path and Op is a
// usable default. Run more processes for more parallel streams.
type Spec struct {
	Path string // file or block device
	Op   Op

	// BlockSize is the size of each request; 0 means DefaultSeqBlockSize
	// for read and write, DefaultRandBlockSize for randread.
	BlockSize int64

	// Bytes stops the job after this many bytes; 0 means no limit. Under
	// Direct a read's last request is rounded up to DirectAlign and
	// Result.Bytes counts what was transferred, so it may exceed Bytes by
	// less than DirectAlign.
	Bytes int64
	// Duration stops the job after this long; 0 means no limit. A request
	// in flight is finished first.
	Duration time.Duration

	// Offset and Span are the region used: [Offset, Offset+Span). Span 0
	// means to the end of the file or device (for write to a regular file
	// without Size: unbounded). For reads the region is clipped at the end
	// of the file. Two readers of one device can use disjoint regions.
	Offset int64
	Span   int64
	// Loop starts again at Offset when a sequential job reaches the end of
	// its region, so it streams until Bytes, Duration or cancellation.
	Loop bool

	// Direct opens with O_DIRECT, bypassing the page cache. BlockSize,
	// Offset, Span, Size and (for write) Bytes must be multiples of
	// DirectAlign. A short last read at end of file is fine.
	Direct bool
	// Sync calls fdatasync after the last write; its time is part of
	// Result.Elapsed. Write only.
	Sync bool
	// Create creates Path (mode 0644) if it does not exist. Write only.
	Create bool
	// Size, when not 0, truncates or extends the file to Size bytes before
	// writing, which also bounds the region. Write only; regular files only.
	Size int64
	// DropCache drops the region's clean pages from the page cache
	// (posix_fadvise DONTNEED) before starting, for a cold read of one file
	// without dropping the whole page cache. Dirty pages stay: sync first.
	DropCache bool
	// RateLimit caps throughput in bytes per second; 0 means none. Before
	// each request the job sleeps until the request fits under the cap, so
	// Bytes/Elapsed never exceeds it; each request itself goes at full
	// speed, so smaller blocks give a smoother rate. A job held back makes
	// up at most RateCredit of its schedule at full speed.
	RateLimit int64
	// Seed seeds random offsets and written data; 0 picks one at random.
	Seed uint64

	// IODepth is how many requests are in flight at once: that many
	// goroutines each issue one pread or pwrite at a time, taking the next
	// offset from the one region (sequential jobs stay sequential as a
	// whole). 0 and 1 mean one request at a time.
	IODepth int
	// IOPS paces requests at this many per second over the whole job (a
	// server answering requests, not a stream); 0 means as fast as they
	// complete. Result.Latency is each request's service time, from its
	// issue (as fio reports it); Result.Response counts from when it was
	// due, so a stall shows as the time every request waited behind it (no
	// coordinated omission).
	IOPS float64
	// FsyncEvery calls fdatasync each time the job has written this many
	// more bytes (a database's checkpoint, a log's commit); 0 means never.
	// The calls are counted in Result.Fsyncs, their time is not a request's
	// latency. Write only.
	FsyncEvery int64
	// KeepLatencies adds every request's service time to
	// Result.Latencies (8 bytes each, kept in memory), so a caller can
	// pool the requests of several jobs, e.g. one percentile over many
	// light tenants that each do too few requests for their own.
	KeepLatencies bool
}

// MaxIODepth bounds IODepth.
const MaxIODepth = 1024

// SpecError is one invalid field of a Spec. Validate joins several with
// errors.Join; find one with errors.As.
type SpecError struct {
	Field  string // Spec field name, e.g. "BlockSize"
	Value  any    // the bad value
	Reason string // what is wrong, in words that suit the CLI as well as Go callers
}

func (e *SpecError) Error() string {
	return fmt.Sprintf("%s %v: %s", e.Field, e.Value, e.Reason)
}

// blockSize returns the effective block size.
func (s Spec) blockSize() int64 {
	switch {
	case s.BlockSize > 0:
		return s.BlockSize
	case s.Op.random():
		return DefaultRandBlockSize
	default:
		return DefaultSeqBlockSize
	}
}

// Validate reports every problem with s that can be seen without opening
// Path. Run calls it; call it yourself to tell usage errors from I/O errors.
func (s Spec) Validate() error {
	var errs []error
	bad := func(field string, v any, reason string) {
		errs = append(errs, &SpecError{Field: field, Value: v, Reason: reason})
	}
	if s.Path == "" {
		bad("Path", strconv.Quote(s.Path), "must not be empty")
	}
	switch s.Op {
	case OpRead, OpWrite, OpRandRead, OpRandWrite:
	default:
		bad("Op", strconv.Quote(string(s.Op)), "must be read, write, randread or randwrite")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"BlockSize", s.BlockSize}, {"Bytes", s.Bytes}, {"Offset", s.Offset},
		{"Span", s.Span}, {"Size", s.Size}, {"RateLimit", s.RateLimit},
		{"FsyncEvery", s.FsyncEvery},
	} {
		if f.v < 0 {
			bad(f.name, f.v, "must not be negative")
		}
	}
	if s.Offset > 0 && s.Span > math.MaxInt64-s.Offset {
		bad("Span", s.Span, "offset plus span overflows")
	}
	if s.BlockSize > MaxBlockSize {
		bad("BlockSize", s.BlockSize, fmt.Sprintf("must be at most %d", MaxBlockSize))
	}
	if s.Duration < 0 {
		bad("Duration", s.Duration, "must not be negative")
	}
	if s.IODepth < 0 || s.IODepth > MaxIODepth {
		bad("IODepth", s.IODepth, fmt.Sprintf("must be 1..%d", MaxIODepth))
	}
	if s.IOPS < 0 || math.IsNaN(s.IOPS) || math.IsInf(s.IOPS, 0) {
		bad("IOPS", s.IOPS, "must be a positive number of requests per second")
	}
	if !s.Op.writes() {
		if s.Sync {
			bad("Sync", s.Sync, "applies to write only")
		}
		if s.Create {
			bad("Create", s.Create, "applies to write only")
		}
		if s.Size != 0 {
			bad("Size", s.Size, "applies to write only")
		}
		if s.FsyncEvery != 0 {
			bad("FsyncEvery", s.FsyncEvery, "applies to write only")
		}
	}
	if s.Op.random() && s.Loop {
		bad("Loop", s.Loop, "applies to sequential read and write only; "+string(s.Op)+" never reaches an end")
	}
	if s.Op.writes() && s.Size > 0 && s.Offset >= s.Size {
		bad("Offset", s.Offset, fmt.Sprintf("must be below the size %d", s.Size))
	}
	if s.Direct {
		const why = "must be a multiple of 4096 for direct I/O"
		if bs := s.blockSize(); bs%DirectAlign != 0 {
			bad("BlockSize", bs, why)
		}
		for _, f := range []struct {
			name string
			v    int64
		}{{"Offset", s.Offset}, {"Span", s.Span}, {"Size", s.Size}} {
			if f.v%DirectAlign != 0 {
				bad(f.name, f.v, why)
			}
		}
		if s.Op.writes() && s.Bytes%DirectAlign != 0 {
			bad("Bytes", s.Bytes, why+" writes")
		}
	}
	return errors.Join(errs...)
}

// Args renders s as the arguments Main takes: flags, then op and path.
// Fields at their zero value are left out, so Main(s.Args()) runs s.
func (s Spec) Args() []string {
	var a []string
	num := func(flag string, v int64) {
		if v != 0 {
			a = append(a, flag, strconv.FormatInt(v, 10))
		}
	}
	boolean := func(flag string, v bool) {
		if v {
			a = append(a, flag)
		}
	}
	num("--bs", s.BlockSize)
	num("--bytes", s.Bytes)
	if s.Duration != 0 {
		a = append(a, "--duration", s.Duration.String())
	}
	num("--offset", s.Offset)
	num("--span", s.Span)
	boolean("--loop", s.Loop)
	boolean("--direct", s.Direct)
	boolean("--sync", s.Sync)
	boolean("--create", s.Create)
	num("--size", s.Size)
	boolean("--drop-cache", s.DropCache)
	num("--rate", s.RateLimit)
	if s.IODepth > 1 {
		a = append(a, "--iodepth", strconv.Itoa(s.IODepth))
	}
	if s.IOPS != 0 {
		a = append(a, "--iops", strconv.FormatFloat(s.IOPS, 'g', -1, 64))
	}
	num("--fsync-every", s.FsyncEvery)
	boolean("--keep-latencies", s.KeepLatencies)
	if s.Seed != 0 {
		a = append(a, "--seed", strconv.FormatUint(s.Seed, 10))
	}
	// "--" keeps a path that starts with "-" from being read as a flag.
	return append(a, "--", string(s.Op), s.Path)
}
