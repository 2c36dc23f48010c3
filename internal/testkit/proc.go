package testkit

import (
	"os/exec"
	"runtime"
	"testing"
)

// StartHeld starts cmd, whose SysProcAttr sets a Pdeathsig, from an OS
// thread held until the test's cleanup. The kernel sends Pdeathsig when the
// thread that forked the child exits, not the process; and the Go runtime
// ends a thread whose locked goroutine returns. A child started from a
// thread given back to the pool dies when a later goroutine takes that
// thread, locks it and returns — as the private dockerd's holder does when
// the engine is stopped: TestRealRunDockerEngineLost's daemon got SIGTERM
// when its test stopped the engine for the second time.
//
// Register StartHeld before the cleanup that stops the child, so that the
// thread is let go (and the Pdeathsig fires) only after the child is gone.
func StartHeld(t testing.TB, cmd *exec.Cmd) error {
	t.Helper()
	started := make(chan error, 1)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		err := cmd.Start()
		started <- err
		if err == nil {
			<-release
		}
	}()
	err := <-started
	if err == nil {
		t.Cleanup(func() { close(release) })
	}
	return err
}
