package main

// The operator's side of the fault matrix on the real binary: what the
// daemon says at start and on SIGHUP (see run_real_test.go for the rig).

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lockedBuffer collects a child's stderr; safe to read while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startLogged is runRig.start with the log kept for the test to read; args
// replace the rig's defaults.
func (r *runRig) startLogged(t *testing.T, args ...string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	cmd := exec.Command(r.bin, append([]string{"run", "--source", "cgroup", "--cgroup-parent", r.parent,
		"--state-file", r.state, "--devices", r.loop.Name}, args...)...)
	logs := &lockedBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs.String())
		}
	})
	return cmd, logs
}

// waitLog waits until the log holds a line containing every one of parts,
// and returns that line.
func waitLog(t *testing.T, logs *lockedBuffer, within time.Duration, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %s", parts, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRealRunWarnsListenBeyondLoopback: --listen on every address logs a
// WARN naming the address and the missing authentication; loopback does not.
func TestRealRunWarnsListenBeyondLoopback(t *testing.T) {
	r := newRunRig(t)
	_, port, _ := net.SplitHostPort(r.addr)
	wide := "0.0.0.0:" + port
	d, logs := r.startLogged(t, "--interval", "100ms", "--listen", wide)
	line := waitLog(t, logs, 10*time.Second, "level=WARN", "no authentication")
	if !strings.Contains(line, "addr="+wide) {
		t.Errorf("warning does not name %s: %s", wide, line)
	}
	t.Logf("run --listen %s: %s", wide, line)
	waitLog(t, logs, 10*time.Second, "api listening")
	stopWith(t, d, syscall.SIGTERM)

	d, logs = r.startLogged(t, "--interval", "100ms", "--listen", r.addr)
	waitLog(t, logs, 10*time.Second, "api listening", "addr="+r.addr)
	stopWith(t, d, syscall.SIGTERM)
	if strings.Contains(logs.String(), "no authentication") {
		t.Errorf("warned for loopback %s:\n%s", r.addr, logs)
	}

	var help bytes.Buffer
	if code := runDaemon([]string{"--help"}, &help, &help); code != 0 {
		t.Fatalf("run --help: exit %d", code)
	}
	if h := strings.Join(strings.Fields(help.String()), " "); !strings.Contains(h, "The API has no authentication") {
		t.Errorf("run --help does not say the API has no authentication:\n%s", help.String())
	}
}

var _ = filepath.Join
var _ = os.Getpid
