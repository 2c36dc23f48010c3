package main

import (
	"bufio"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRealRunStderrGoneStillRestores: the daemon run under "| tee" and
// stopped with Ctrl-C (issue 18) — its stderr's reader is gone when the
// shutdown logs — still restores every original and exits 0, instead of
// dying of SIGPIPE with its weights left in the cgroups.
func TestRealRunStderrGoneStillRestores(t *testing.T) {
	r := newRunRig(t)
	small := r.child(t, "small")
	if err := r.setWeight(t, small, "300"); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(r.bin, "run", "--source", "cgroup", "--cgroup-parent", r.parent,
		"--interval", "100ms", "--listen", r.addr, "--state-file", r.state,
		"--devices", r.loop.Name, "--log-level", "debug")
	cmd.Env = r.env()
	cmd.Stderr = pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var logs strings.Builder
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			logs.WriteString(sc.Text() + "\n")
		}
	}()
	r.waitLevel(t, "small", 1)
	r.read(t, small, 3<<20, 0)
	r.waitLevel(t, "small", 2)
	if v, _ := r.weight(t, small); v != 500 {
		t.Fatalf("small at level 2 has weight %d, want 500", v)
	}
	pr.Close() // the tee is gone: every later write to stderr is EPIPE
	<-readerDone
	time.Sleep(500 * time.Millisecond) // five debug-logging ticks into the closed pipe
	if cmd.ProcessState != nil {
		t.Fatalf("the daemon exited when its stderr's reader went: %v", cmd.ProcessState)
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("SIGINT: %v (the daemon died when its stderr's reader went?); log before:\n%s", err, logs.String())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("daemon after SIGINT with its stderr's reader gone: %v (want exit 0); log before:\n%s", err, logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("daemon did not exit after SIGINT")
	}
	if v, ok := r.weight(t, small); !ok || v != 300 {
		t.Fatalf("after SIGINT with stderr gone small's weight is %d (set %v), want the original 300", v, ok)
	}
}

// TestRealRunDryRunWritesNothing: --dry-run writes no cgroup file and no
// state file (issue 18: it wrote the state file, which the next real run
// adopted).
func TestRealRunDryRunWritesNothing(t *testing.T) {
	r := newRunRig(t)
	small := r.child(t, "small")
	d, logs := r.launch(t, "run", "--dry-run", "--source", "cgroup", "--cgroup-parent", r.parent,
		"--interval", "100ms", "--listen", r.addr, "--state-file", r.state,
		"--devices", r.loop.Name, "--log-level", "debug")
	r.waitLevel(t, "small", 1)
	r.read(t, small, 3<<20, 0)
	r.waitLevel(t, "small", 2) // decided, and a real run would have written 500
	time.Sleep(300 * time.Millisecond)
	if v, ok := r.weight(t, small); ok {
		t.Fatalf("dry run wrote weight %d on small", v)
	}
	if code := term(t, d); code != 0 {
		t.Fatalf("dry run: exit %d after SIGTERM; log:\n%s", code, logs.String())
	}
	if _, err := os.Stat(r.state); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("dry run left a state file at %s (stat: %v)", r.state, err)
	}
}
