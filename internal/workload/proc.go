package workload

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// EnvMain is the environment variable that makes MaybeRunFromEnv run Main.
const EnvMain = "DDISKQOS_WORKLOAD_MAIN"

// MaybeRunFromEnv runs Main with the process's arguments and exits, when
// the environment has DDISKQOS_WORKLOAD_MAIN=1; otherwise it returns at once.
// Call it first thing in a test package's TestMain so that the test binary,
// re-executed with that variable, becomes a workload process.
func MaybeRunFromEnv() {
	if os.Getenv(EnvMain) != "1" {
		return
	}
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// Exe returns the program and arguments that run the load generator:
// this binary's "workload" command, or, in a test binary that runs Main
// when re-executed with DDISKQOS_WORKLOAD_MAIN=1 (MaybeRunFromEnv), the
// test binary itself.
func Exe() (string, []string, error) {
	if os.Getenv(EnvMain) != "" {
		return os.Args[0], nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	return exe, []string{"workload"}, nil
}

// ErrNoResult means a workload process ended without printing a result:
// it was never told to go (Wait closes its stdin), or was stopped before.
var ErrNoResult = errors.New("workload printed no result")

// Proc is a workload process started by Start, waiting for Go.
type Proc struct {
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	pid     int
	out     bytes.Buffer // stdout after the ready line
	outDone chan struct{}
	stderr  bytes.Buffer
}

// Start starts exe with args and returns once it has printed "ready <pid>",
// before it does any I/O: put Pid into a cgroup, then call Go, then Wait.
//
// The args are passed as given, so they work for "ddiskqos workload ...",
// for a test binary run with extraEnv DDISKQOS_WORKLOAD_MAIN=1, or behind a
// wrapper; they must include --wait-stdin and --json. The environment is the
// current one plus extraEnv. When ctx is done the process is killed.
func Start(ctx context.Context, exe string, extraEnv []string, args []string) (*Proc, error) {
	for _, f := range []string{"wait-stdin", "json"} {
		if !hasFlag(args, f) {
			return nil, fmt.Errorf("start workload %s: args %q lack --%s", exe, args, f)
		}
	}
	p := &Proc{outDone: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, exe, args...)
	p.cmd.Env = append(os.Environ(), extraEnv...)
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("start workload %s: %w", exe, err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("start workload %s: %w", exe, err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start workload %s: %w", exe, err)
	}
	// If the process dies or ctx kills it, stdout closes and this returns.
	r := bufio.NewReader(stdout)
	line, err := r.ReadString('\n')
	pid, perr := parseReady(line)
	if err != nil || perr != nil {
		p.stdin.Close()
		_, _ = io.Copy(io.Discard, r)
		werr := p.cmd.Wait()
		return nil, fmt.Errorf("start workload %s: no ready line (got %q, %v): %v: %s",
			exe, line, errors.Join(err, perr), werr, strings.TrimSpace(p.stderr.String()))
	}
	p.pid = pid
	go func() {
		defer close(p.outDone)
		_, _ = io.Copy(&p.out, r)
	}()
	return p, nil
}

// parseReady reads the line "ready <pid>\n".
func parseReady(line string) (int, error) {
	f, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "ready ")
	if !ok {
		return 0, fmt.Errorf("not a ready line: %q", line)
	}
	pid, err := strconv.Atoi(f)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("bad pid in ready line %q", line)
	}
	return pid, nil
}

// hasFlag reports whether args set the boolean flag name before any "--".
func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if a == name || a == name+"=true" {
			return true
		}
	}
	return false
}

// StartIn starts a workload process (see Start), lets place put it where
// it belongs (a cgroup's AddProcess; nil: where it is) before it does any
// I/O, and tells it to go. When place or Go fails the process is killed
// and reaped.
func StartIn(ctx context.Context, exe string, extraEnv, args []string, place func(pid int) error) (*Proc, error) {
	p, err := Start(ctx, exe, extraEnv, args)
	if err != nil {
		return nil, err
	}
	if place != nil {
		err = place(p.Pid())
	}
	if err == nil {
		err = p.Go()
	}
	if err != nil {
		p.Kill()
		p.Wait()
		return nil, err
	}
	return p, nil
}

// RunIn runs a workload process to its end: StartIn, then Wait.
func RunIn(ctx context.Context, exe string, extraEnv, args []string, place func(pid int) error) (Result, error) {
	p, err := StartIn(ctx, exe, extraEnv, args, place)
	if err != nil {
		return Result{}, err
	}
	return p.Wait()
}

// Pid is the process id the workload reported, its id in its own pid
// namespace; when exe is not a wrapper it is also the child's id here.
func (p *Proc) Pid() int { return p.pid }

// Go tells the workload to start its I/O.
func (p *Proc) Go() error {
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		return fmt.Errorf("workload %d: go: %w", p.pid, err)
	}
	return nil
}

// Stop sends SIGTERM: the workload ends its job early and Wait returns the
// result so far.
func (p *Proc) Stop() error { return p.cmd.Process.Signal(unix.SIGTERM) }

// Kill sends SIGKILL; Wait then returns an error. Call Wait to reap.
func (p *Proc) Kill() error { return p.cmd.Process.Kill() }

// Wait waits for the workload to end and returns its result. It closes the
// workload's stdin first, so a workload never told to Go exits without I/O
// and Wait returns ErrNoResult. Call Wait once.
func (p *Proc) Wait() (Result, error) {
	p.stdin.Close()
	<-p.outDone // all of stdout is read before Wait closes the pipe
	if err := p.cmd.Wait(); err != nil {
		return Result{}, fmt.Errorf("workload %d: %w: %s", p.pid, err, strings.TrimSpace(p.stderr.String()))
	}
	out := bytes.TrimSpace(p.out.Bytes())
	if len(out) == 0 {
		return Result{}, fmt.Errorf("workload %d: %w", p.pid, ErrNoResult)
	}
	var r Result
	if err := json.Unmarshal(out, &r); err != nil {
		return Result{}, fmt.Errorf("workload %d: result %q: %w", p.pid, out, err)
	}
	return r, nil
}
