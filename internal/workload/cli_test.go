package workload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want cmdLine
	}{
		{"minimal", []string{"read", "/dev/vdb"}, cmdLine{spec: Spec{Op: OpRead, Path: "/dev/vdb"}}},
		{
			"all flags",
			[]string{
				"--bytes", "3MiB", "--duration", "1m30s", "--bs", "4k", "--offset", "1GiB",
				"--span", "100MB", "--loop", "--direct", "--drop-cache", "--rate", "50MB/s",
				"--seed", "7", "--json", "--wait-stdin", "read", "/dev/vdb",
			},
			cmdLine{json: true, waitStdin: true, spec: Spec{
				Op: OpRead, Path: "/dev/vdb", Bytes: 3 << 20, Duration: 90 * time.Second,
				BlockSize: 4096, Offset: 1 << 30, Span: 100e6, Loop: true, Direct: true,
				DropCache: true, RateLimit: 50e6, Seed: 7,
			}},
		},
		{
			"write flags, single dash and =",
			[]string{"-create", "--sync=true", "--size=1GiB", "write", "/data/f"},
			cmdLine{spec: Spec{Op: OpWrite, Path: "/data/f", Create: true, Sync: true, Size: 1 << 30}},
		},
		{
			"flags after the operands",
			[]string{"randread", "/dev/vdb", "--bytes", "4k", "--json"},
			cmdLine{json: true, spec: Spec{Op: OpRandRead, Path: "/dev/vdb", Bytes: 4096}},
		},
		{
			"flags between the operands",
			[]string{"write", "--bytes", "1k", "/data/f"},
			cmdLine{spec: Spec{Op: OpWrite, Path: "/data/f", Bytes: 1024}},
		},
		{
			"-- ends the flags",
			[]string{"--bytes", "1k", "--", "read", "--json"},
			cmdLine{spec: Spec{Op: OpRead, Path: "--json", Bytes: 1024}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseArgs(tc.args)
			if err != nil {
				t.Fatalf("parseArgs(%q): %v", tc.args, err)
			}
			if got != tc.want {
				t.Errorf("parseArgs(%q) =\n%+v\nwant\n%+v", tc.args, got, tc.want)
			}
		})
	}
}

// TestSpecArgsRoundTrip checks that Spec.Args and the command line agree.
func TestSpecArgsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, s := range []Spec{
		{Op: OpRead, Path: "/dev/vdb"},
		{Op: OpRandRead, Path: "-odd name", BlockSize: 8192, Bytes: 1, Duration: 1500 * time.Millisecond,
			Offset: 4096, Span: 1 << 40, Direct: true, DropCache: true, RateLimit: 12345, Seed: 1 << 63},
		{Op: OpWrite, Path: "f", Loop: true, Sync: true, Create: true, Size: 1 << 20},
		{Op: OpWrite, Path: "f", IODepth: 32, IOPS: 12.5, FsyncEvery: 64 << 20, Direct: true, KeepLatencies: true},
	} {
		got, err := parseArgs(s.Args())
		if err != nil {
			t.Fatalf("parseArgs(%q): %v", s.Args(), err)
		}
		if got.spec != s {
			t.Errorf("parseArgs(%q) = %+v; want %+v", s.Args(), got.spec, s)
		}
	}
}

// TestMainUsageErrors checks exit status 2 and a message naming the flag
// or value at fault, before any file is touched.
func TestMainUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		msgs []string
	}{
		{nil, []string{"missing operation"}},
		{[]string{"read"}, []string{`missing PATH after "read"`}},
		{[]string{"read", "a", "b"}, []string{`unexpected argument "b"`}},
		{[]string{"copy", "a"}, []string{`unknown operation "copy"`}},
		{[]string{"--bytes", "3XB", "read", "a"}, []string{"--bytes", `"3XB"`, `unknown unit "XB"`}},
		{[]string{"--bs", "-4k", "read", "a"}, []string{"--bs", `"-4k"`, "negative"}},
		{[]string{"--rate", "fast", "read", "a"}, []string{"--rate", `"fast"`}},
		{[]string{"--duration", "soon", "read", "a"}, []string{"--duration", `"soon"`}},
		{[]string{"--duration", "-1s", "read", "a"}, []string{"--duration -1s: must not be negative"}},
		{[]string{"--verbose", "read", "a"}, []string{"flag provided but not defined: --verbose"}},
		{[]string{"read", "a", "--verbose"}, []string{"flag provided but not defined: --verbose"}},
		{[]string{"--bytes"}, []string{"-bytes"}},
		{[]string{"--direct", "--bs", "1000", "read", "a"}, []string{"--bs 1000: must be a multiple of 4096"}},
		{
			[]string{"--direct", "--offset", "1k", "--span", "2k", "read", "a"},
			[]string{"--offset 1024: must be a multiple of 4096", "--span 2048: must be a multiple of 4096"},
		},
		{[]string{"--direct", "--bytes", "1MB", "write", "a"}, []string{"--bytes 1000000: must be a multiple of 4096 for direct I/O writes"}},
		{[]string{"--sync", "read", "a"}, []string{"--sync: applies to write only"}},
		{[]string{"--size", "1M", "randread", "a"}, []string{"--size 1048576: applies to write only"}},
		{[]string{"--loop", "randread", "a"}, []string{"--loop: applies to sequential"}},
		{[]string{"--bs", "2GiB", "read", "a"}, []string{"--bs 2147483648: must be at most"}},
		{[]string{"--size", "1M", "--offset", "1M", "write", "a"}, []string{"--offset 1048576: must be below the size"}},
		{[]string{"read", ""}, []string{`PATH "": must not be empty`}},
		{[]string{"--iodepth", "-1", "read", "a"}, []string{"--iodepth -1: must be 1..1024"}},
		{[]string{"--iodepth", "2000", "read", "a"}, []string{"--iodepth 2000: must be 1..1024"}},
		{[]string{"--iops", "-5", "read", "a"}, []string{"--iops -5: must be a positive number"}},
		{[]string{"--iops", "lots", "read", "a"}, []string{"--iops", `"lots"`}},
		{[]string{"--fsync-every", "1M", "read", "a"}, []string{"--fsync-every 1048576: applies to write only"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := mainContext(t.Context(), tc.args, nil, &stdout, &stderr)
			if code != ExitUsage {
				t.Errorf("exit status %d; want %d", code, ExitUsage)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout %q; want nothing", stdout.String())
			}
			for _, m := range tc.msgs {
				if !strings.Contains(stderr.String(), m) {
					t.Errorf("stderr %q; want it to contain %q", stderr.String(), m)
				}
			}
			if !strings.Contains(stderr.String(), "--help") {
				t.Errorf("stderr %q does not point to --help", stderr.String())
			}
		})
	}
}

// TestMainUsageErrorsAfterOpen checks that problems only visible once the
// file is open are usage errors too.
func TestMainUsageErrorsAfterOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f := filepath.Join(dir, "f")
	if err := os.WriteFile(f, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"read", dir}, "is a directory"},
		{[]string{"--bytes", "1k", "write", dir}, "is a directory"},
		{[]string{"--offset", "8k", "read", f}, "--offset 8192: leaves nothing to read"},
		{[]string{"--bs", "16k", "randread", f}, "--span 0: leaves a region of 8192 bytes, smaller than the block size 16384"},
		{[]string{"write", f}, "--bytes 0: limit needed"},
		{[]string{"--loop", "--bytes", "1M", "write", f}, "--loop: needs a bounded region"},
	} {
		var stdout, stderr bytes.Buffer
		if code := mainContext(t.Context(), tc.args, nil, &stdout, &stderr); code != ExitUsage {
			t.Errorf("%q: exit status %d; want %d (stderr %q)", tc.args, code, ExitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%q: stderr %q; want it to contain %q", tc.args, stderr.String(), tc.msg)
		}
	}
}

func TestMainIOError(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	missing := filepath.Join(t.TempDir(), "missing")
	if code := mainContext(t.Context(), []string{"read", missing}, nil, &stdout, &stderr); code != ExitIO {
		t.Errorf("exit status %d; want %d", code, ExitIO)
	}
	if !strings.Contains(stderr.String(), missing) || stdout.Len() != 0 {
		t.Errorf("stdout %q, stderr %q; want only an error naming %s", stdout.String(), stderr.String(), missing)
	}
}

func TestMainRuns(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, make([]byte, 3<<20+5), 0o644); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	if code := mainContext(t.Context(), []string{"read", f}, nil, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit status %d, stderr %q", code, stderr.String())
	}
	want := fmt.Sprintf("read %s: 3145733 bytes (3.0 MiB) in ", f)
	if line := stdout.String(); !strings.HasPrefix(line, want) || !strings.Contains(line, ", 4 ops, bs 1.0 MiB, latency us p50 ") ||
		strings.Count(line, "\n") != 1 {
		t.Errorf("summary %q; want one line starting %q", line, want)
	}

	stdout.Reset()
	if code := mainContext(t.Context(), []string{"--json", "--bs", "1M", "--bytes", "2M", "read", f}, nil, &stdout, &stderr); code != ExitOK {
		t.Fatalf("exit status %d, stderr %q", code, stderr.String())
	}
	var r Result
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatalf("--json output %q: %v", stdout.String(), err)
	}
	if r.Op != OpRead || r.Path != f || r.Bytes != 2<<20 || r.Ops != 2 || r.BlockSize != 1<<20 {
		t.Errorf("--json result %+v", r)
	}
	for _, key := range []string{`"bytes_per_sec":`, `"elapsed_ns":`, `"latency_us":{"p50":`, `"p99_9":`, `"start":`} {
		if !strings.Contains(stdout.String(), key) {
			t.Errorf("--json output %q lacks %s", stdout.String(), key)
		}
	}
}

func TestMainWaitStdin(t *testing.T) {
	t.Parallel()
	f := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(f, make([]byte, 4096), 0o644); err != nil {
		t.Fatal(err)
	}
	ready := fmt.Sprintf("ready %d\n", os.Getpid())
	for _, tc := range []struct {
		name, stdin string
		runs        bool
	}{
		{"line", "go\n", true},
		{"empty line", "\n", true},
		{"eof", "", false},
		{"eof mid-line", "go", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := mainContext(t.Context(), []string{"--wait-stdin", "--json", "read", f}, strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != ExitOK {
				t.Fatalf("exit status %d, stderr %q", code, stderr.String())
			}
			first, rest, _ := strings.Cut(stdout.String(), "\n")
			if first+"\n" != ready {
				t.Errorf("first line %q; want %q", first, ready)
			}
			if ran := strings.Contains(rest, `"bytes":4096`); ran != tc.runs {
				t.Errorf("stdout %q: ran = %v; want %v", stdout.String(), ran, tc.runs)
			}
		})
	}
}

func TestMainWaitStdinCancel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var stdout, stderr bytes.Buffer
	blocked, w, err := os.Pipe() // never written to
	if err != nil {
		t.Fatal(err)
	}
	defer blocked.Close()
	defer w.Close()
	if code := mainContext(ctx, []string{"--wait-stdin", "read", "/nonexistent"}, blocked, &stdout, &stderr); code != ExitOK {
		t.Errorf("exit status %d, stderr %q; want 0 and no I/O", code, stderr.String())
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"--help", "-h", "-help"} {
		var stdout, stderr bytes.Buffer
		if code := mainContext(t.Context(), []string{arg}, nil, &stdout, &stderr); code != ExitOK || stderr.Len() != 0 {
			t.Fatalf("%s: exit status %d, stderr %q", arg, code, stderr.String())
		}
		golden(t, "help.golden", stdout.Bytes())
	}
	// Every flag is taught.
	var b bytes.Buffer
	cli.WriteHelp(&b, Command)
	helpText := b.String()
	for _, f := range Command.FlagSet().Flags() {
		if !strings.Contains(helpText, "\n  --"+f.Name) {
			t.Errorf("help does not describe --%s", f.Name)
		}
	}
	for _, line := range strings.Split(helpText, "\n") {
		if len(line) > 80 {
			t.Errorf("help line longer than 80 columns: %q", line)
		}
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", name), string(got))
}

func TestValidateJoinsEverything(t *testing.T) {
	t.Parallel()
	err := Spec{Op: "copy", BlockSize: -1, Duration: -1}.Validate()
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var se *SpecError
		if !errors.As(e, &se) {
			t.Fatalf("%v is not a *SpecError", e)
		}
		fields = append(fields, se.Field)
	}
	if want := []string{"Path", "Op", "BlockSize", "Duration"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("fields %q; want %q (in order)", fields, want)
	}
}

// parseArgs parses a command line as Main does, without running it.
func parseArgs(args []string) (cmdLine, error) {
	var errb bytes.Buffer
	c, rest, code, ok := Command.Parse(args, io.Discard, &errb)
	if !ok {
		if code == 0 {
			return cmdLine{}, flag.ErrHelp
		}
		return cmdLine{}, errors.New(errb.String())
	}
	err := c.operands(rest)
	return *c, err
}

// TestMainThreadsFromErrors checks --threads-from's usage errors: each
// names the input, and none does I/O.
func TestMainThreadsFromErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	list := filepath.Join(dir, "tasks.list")
	if err := os.WriteFile(list, []byte("/sys/fs/cgroup/blkio/x/tasks\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty.list")
	if err := os.WriteFile(empty, []byte("# nothing\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.list")
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--threads-from", missing, "read", "a"}, "--threads-from: open " + missing},
		{[]string{"--threads-from", empty, "read", "a"}, empty + " lists no cgroup tasks files"},
		{[]string{"--threads-from", list, "read", "a"}, "--span 0: must be set to run one copy per thread"},
		{[]string{"--threads-from", list, "--span", "1M", "--iodepth", "4", "read", "a"}, "--iodepth 4: must be 1 to run one copy per thread"},
	} {
		var stdout, stderr bytes.Buffer
		if code := mainContext(t.Context(), tc.args, nil, &stdout, &stderr); code != ExitUsage {
			t.Errorf("%q: exit status %d, want %d (stderr %q)", tc.args, code, ExitUsage, stderr.String())
		}
		if !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%q: stderr %q, want %q", tc.args, stderr.String(), tc.msg)
		}
	}
}
