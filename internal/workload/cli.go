package workload

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/bytesize"
	"github.com/ddiskqos/ddiskqos/internal/cli"
)

// Exit codes of Main.
const (
	ExitOK    = 0 // done, also when stopped by SIGINT or SIGTERM
	ExitIO    = 1 // an I/O error (open, read, write, sync)
	ExitUsage = 2 // bad flags, arguments or combination of them
)

const cmdName = "ddiskqos workload"

// Command declares "ddiskqos workload": its help, its flags, their
// completion and man page come from it (internal/cli).
var Command = &cli.Cmd[cmdLine]{
	Info: cli.Info{
		Name: "workload", Args: "read|write|randread|randwrite PATH", ArgsComplete: cli.Files,
		Summary: "the load generator the tests and benchmarks run (also inside containers)",
		Description: `Generate disk I/O on one file or block device, one request at a time (queue
depth 1) or --iodepth at a time, and report throughput and per-request
latency. Run several processes for several streams.

Operations:
  read      read the region sequentially, --bs bytes per request
  write     write pseudo-random data over the region sequentially
  randread  read --bs bytes at random --bs-aligned offsets in the region
  randwrite write --bs bytes at random --bs-aligned offsets in the region
            (a block device, or a regular file up to its size or --size)

The region is --span bytes from --offset; without --span it runs to the end of
the file or device (for a regular file being written: unbounded). Readers of
one device can take disjoint regions. A job stops at the first of: --bytes
moved, --duration passed, the end of the region (unless --loop), or SIGINT or
SIGTERM, after which the result so far is printed and the exit status is 0.

Sizes: 4096, 4k, 3MiB, 1.5GiB (k m g t and KiB MiB GiB TiB are powers of
1024), 100MB, 2GB (kB MB GB TB are powers of 1000).`,
		Examples: `  # Cold read of 1 MiB: drop this file's cached pages, then read it once.
  ddiskqos workload --drop-cache --bytes 1MiB read /data/blob

  # Bulk stream: read the first 10 GiB of a device over and over, bypassing
  # the page cache, capped at 200 MB/s, until stopped.
  ddiskqos workload --direct --span 10GiB --loop --rate 200MB/s read /dev/vdb

  # 4k random reads for 30 seconds in the second 50 GiB of a device.
  ddiskqos workload --direct --duration 30s --offset 50GiB --span 50GiB \
      randread /dev/vdb

  # A noisy neighbour: stream a device at 32 requests in flight.
  ddiskqos workload --direct --iodepth 32 --loop read /dev/vdb

  # A web-server-like victim: 100 random 4k reads per second for 10 s.
  ddiskqos workload --direct --iops 100 --duration 10s randread /data/db

  # Write 1 GiB to a new file and flush it to disk.
  ddiskqos workload --create --sync --bytes 1GiB write /data/scratch

  # From a parent that moves the process into a cgroup before it starts:
  ddiskqos workload --wait-stdin --json --bytes 1GiB read /data/blob
  # prints "ready 4711"; write 4711 to the cgroup's cgroup.procs, then
  # send a line to its stdin; the JSON result follows on stdout.`,
		Exit: "0 done, 1 I/O error, 2 usage error.",
	},
	Flags: func(c *cmdLine, f *cli.FlagSet) {
		s := &c.spec
		f.Var(sizeFlag{&s.Bytes, bytesize.Parse}, "bytes", "SIZE", "stop after SIZE bytes (default: no limit)")
		f.DurationVar(&s.Duration, "duration", 0, "DUR", "stop after DUR, e.g. 30s, 5m (default: no limit)")
		f.Var(sizeFlag{&s.BlockSize, bytesize.Parse}, "bs", "SIZE", "bytes per request (default 1MiB; 4k for random ones)")
		f.Var(sizeFlag{&s.Offset, bytesize.Parse}, "offset", "SIZE", "start of the region (default 0)")
		f.Var(sizeFlag{&s.Span, bytesize.Parse}, "span", "SIZE", "length of the region (default: to the end)")
		f.BoolVar(&s.Loop, "loop", "start over at --offset at the end of the region")
		f.BoolVar(&s.Direct, "direct", "O_DIRECT: bypass the page cache; --bs, --offset, --span, --size and a write's --bytes must be multiples of 4096")
		f.BoolVar(&s.DropCache, "drop-cache", "first drop the region's cached pages of this one file (posix_fadvise DONTNEED), for a cold read")
		f.Var(sizeFlag{&s.RateLimit, parseRate}, "rate", "SIZE", "cap throughput at SIZE bytes per second, e.g. 50MB/s; applied per request, so a smaller --bs is smoother")
		f.IntVar(&s.IODepth, "iodepth", 0, "N", "keep N requests in flight (N threads, one pread or pwrite each; with --direct the device sees N at once); a sequential job stays sequential as a whole (default 1)")
		f.Float64Var(&s.IOPS, "iops", 0, "R", "issue R requests per second, paced like a server's requests; latency is each request's service time, and the result adds its response time, counted from when it was due (a stall delays every request behind it)")
		f.Var(sizeFlag{&s.FsyncEvery, bytesize.Parse}, "fsync-every", "SIZE", "write: fdatasync each time SIZE more bytes are written (counted as \"fsyncs\" in the result)")
		f.BoolVar(&s.KeepLatencies, "keep-latencies", "add every request's service time (µs, in order of completion) to the result as \"latencies_us\", to pool several jobs' requests")
		f.BoolVar(&s.Sync, "sync", "write: fdatasync at the end (counted in the time)")
		f.BoolVar(&s.Create, "create", "write: create PATH if missing")
		f.Var(sizeFlag{&s.Size, bytesize.Parse}, "size", "SIZE", "write: truncate or extend the file to SIZE first")
		f.Uint64Var(&s.Seed, "seed", 0, "N", "seed of random offsets and data (default: random)")
		f.BoolVar(&c.json, "json", "print the result as JSON instead of one line of text")
		f.StringVar(&c.threadsFrom, "threads-from", "", "FILE", "cgroup v1: run one copy of the job per line of FILE, each line the path of a cgroup's tasks file, each copy on a thread of its own that joins that cgroup first (v1 lets the threads of one process be in different cgroups): many streams in many cgroups for the cost of one process; copy i takes the region --offset + i×--span (wrapping at the end; --span required, --iodepth 1); the result adds the copies up", cli.Files)
		f.BoolVar(&c.waitStdin, "wait-stdin", "print \"ready <pid>\" and wait for a line on stdin before starting (end of stdin: exit 0, no I/O); lets a parent put this process into a cgroup first")
	},
}

// Main is the command "ddiskqos workload": args are what follows the
// subcommand. It returns the exit status (ExitOK, ExitIO, ExitUsage).
// SIGINT and SIGTERM end the job early, and the result so far is printed:
// as PID 1 of a FROM scratch container it would otherwise ignore docker stop.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, unix.SIGTERM)
	defer stop()
	return mainContext(ctx, args, stdin, stdout, stderr)
}

// cmdLine is a parsed command line.
type cmdLine struct {
	spec        Spec
	json        bool
	waitStdin   bool
	threadsFrom string // --threads-from: run one copy per cgroup tasks file listed
}

func mainContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c, rest, code, ok := Command.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	err := c.operands(rest)
	if err == nil {
		err = c.spec.Validate()
	}
	var tasks []string
	if err == nil && c.threadsFrom != "" {
		if tasks, err = ReadTasksList(c.threadsFrom); err != nil {
			err = fmt.Errorf("--threads-from: %w", err)
		}
	}
	if err != nil {
		usageError(stderr, err)
		return ExitUsage
	}

	if c.waitStdin {
		fmt.Fprintf(stdout, "ready %d\n", os.Getpid())
		if !waitLine(ctx, stdin) {
			return ExitOK
		}
	}

	var r Result
	if tasks != nil {
		r, err = RunThreads(ctx, c.spec, tasks)
	} else {
		r, err = Run(ctx, c.spec)
	}
	if err != nil {
		if _, ok := errors.AsType[*SpecError](err); ok {
			usageError(stderr, err)
			return ExitUsage
		}
		fmt.Fprintf(stderr, "%s: %v\n", cmdName, err)
		return ExitIO
	}
	if c.json {
		if err := json.NewEncoder(stdout).Encode(r); err != nil {
			fmt.Fprintf(stderr, "%s: write result: %v\n", cmdName, err)
			return ExitIO
		}
		return ExitOK
	}
	fmt.Fprintln(stdout, summary(r))
	return ExitOK
}

// waitLine blocks until a whole line arrives on r (true) or r ends, fails
// or ctx is done (false).
func waitLine(ctx context.Context, r io.Reader) bool {
	if r == nil {
		return false
	}
	got := make(chan bool, 1) // buffered: the reader may outlive us
	go func() {
		_, err := bufio.NewReader(r).ReadString('\n')
		got <- err == nil
	}()
	select {
	case ok := <-got:
		return ok
	case <-ctx.Done():
		return false
	}
}

// summary is the one-line human form of r.
func summary(r Result) string {
	l := r.Latency
	line := fmt.Sprintf("%s %s: %d bytes (%s) in %v, %s/s, %d ops, bs %s, latency us p50 %.1f p90 %.1f p99 %.1f p99.9 %.1f max %.1f",
		r.Op, r.Path, r.Bytes, humanBytes(float64(r.Bytes)), r.Elapsed.Round(time.Microsecond),
		humanBytes(r.BytesPerSec), r.Ops, humanBytes(float64(r.BlockSize)),
		l.P50, l.P90, l.P99, l.P999, l.Max)
	if r.IODepth > 1 {
		line += fmt.Sprintf(", iodepth %d", r.IODepth)
	}
	if r.Fsyncs > 0 {
		line += fmt.Sprintf(", %d fsyncs", r.Fsyncs)
	}
	return line
}

// usageError prints err, every joined part on its own line, with Spec
// fields named as the flags that set them.
func usageError(w io.Writer, err error) {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	for _, e := range errs {
		msg := e.Error()
		if se, ok := errors.AsType[*SpecError](e); ok {
			msg = flagMessage(se)
		}
		fmt.Fprintf(w, "%s: %s\n", cmdName, msg)
	}
	fmt.Fprintf(w, "Run '%s --help' for usage.\n", cmdName)
}

// flagMessage words a SpecError for the command line.
func flagMessage(e *SpecError) string {
	name := map[string]string{
		"Path": "PATH", "Op": "operation", "BlockSize": "--bs", "Bytes": "--bytes",
		"Duration": "--duration", "Offset": "--offset", "Span": "--span",
		"Loop": "--loop", "Direct": "--direct", "Sync": "--sync", "Create": "--create",
		"Size": "--size", "DropCache": "--drop-cache", "RateLimit": "--rate", "Seed": "--seed",
		"IODepth": "--iodepth", "IOPS": "--iops", "FsyncEvery": "--fsync-every",
	}[e.Field]
	if name == "" {
		return e.Error()
	}
	if _, isBool := e.Value.(bool); isBool {
		return name + ": " + e.Reason
	}
	return fmt.Sprintf("%s %v: %s", name, e.Value, e.Reason)
}

// sizeFlag is a flag.Value holding a size parsed by parse.
type sizeFlag struct {
	p     *int64
	parse func(string) (int64, error)
}

func (f sizeFlag) Set(s string) error {
	n, err := f.parse(s)
	if err != nil {
		return err
	}
	*f.p = n
	return nil
}

func (f sizeFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.FormatInt(*f.p, 10)
}

// operands reads the operation and PATH.
func (c *cmdLine) operands(operands []string) error {
	switch len(operands) {
	case 0:
		return errors.New("missing operation (read, write, randread or randwrite) and PATH")
	case 1:
		return fmt.Errorf("missing PATH after %q", operands[0])
	case 2:
	default:
		return fmt.Errorf("unexpected argument %q after PATH", operands[2])
	}
	switch op := Op(operands[0]); op {
	case OpRead, OpWrite, OpRandRead, OpRandWrite:
		c.spec.Op = op
	default:
		return fmt.Errorf("unknown operation %q (want read, write, randread or randwrite)", operands[0])
	}
	c.spec.Path = operands[1]
	return nil
}
