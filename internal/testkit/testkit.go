// Package testkit holds the helpers that real-kernel tests share: skipping
// (or, in CI, failing) when a prerequisite is missing, and loop devices and
// cgroups that are removed again when the test ends, also when it fails.
//
// Set DDISKQOS_REQUIRE_REAL=1 (the README's test command does) and every
// missing prerequisite becomes a test failure instead of a skip, so the
// real-kernel tests can never be skipped silently where they must run.
package testkit

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Main is a test package's TestMain (see Run) that exits with the tests'
// code.
func Main(m *testing.M, children ...func()) { os.Exit(Run(m, children...)) }

// Run is what Main does, returning the tests' code for a TestMain that
// cleans up after them. A test that starts this test binary again as a
// child process (a workload generator, a lock holder, the ddiskqos
// command) marks the child in its environment: each of children returns at
// once unless the environment says this process is its child, and else
// runs the child and exits (workload.MaybeRunFromEnv). Otherwise the tests
// run.
func Run(m *testing.M, children ...func()) int {
	for _, child := range children {
		child()
	}
	return m.Run()
}

// Background runs fn in a goroutine until the test ends: then fn's context
// is cancelled, and fn must return nil within grace (a source's Run, a
// server). The returned cancel ends fn earlier.
func Background(t testing.TB, grace time.Duration, fn func(ctx context.Context) error) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("returned %v after cancellation, want nil", err)
			}
		case <-time.After(grace):
			t.Errorf("did not return within %s of cancellation", grace)
		}
	})
	return cancel
}

// update is go test's -update: golden files are rewritten from the output.
var update = flag.Bool("update", false, "rewrite the golden files from the output")

// Updating reports whether -update was given.
func Updating() bool { return *update }

// Golden compares got with the golden file path; under -update it writes
// got there instead (creating the directory).
func Golden(t testing.TB, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (run with -update after checking the diff):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// Need skips the test with the reason when ok is false — or fails it, when
// DDISKQOS_REQUIRE_REAL=1.
func Need(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if ok {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if Strict() {
		t.Fatalf("prerequisite missing (DDISKQOS_REQUIRE_REAL=1): %s", msg)
	}
	t.Skipf("prerequisite missing: %s", msg)
}

// NeedRoot requires uid 0.
func NeedRoot(t testing.TB) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "needs root to create cgroups and loop devices (uid is %d)", os.Geteuid())
}

// SyncBuffer is a log sink that a child process or goroutines write while
// the test reads it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// FreeAddr returns a loopback address whose port was free just now, for a
// daemon under test to listen on.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
