package hostlock

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestAcquireRefusesSecondHolder: a second holder is refused with the
// first one's pid; after Release the lock is free again.
func TestAcquireRefusesSecondHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "ddiskqos.lock")
	l, err := Acquire(path)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks are per open file description: a second Acquire in this
	// process conflicts like one in another process would.
	_, err = Acquire(path)
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) || !strings.Contains(err.Error(), path) {
		t.Fatalf("second Acquire: %v; want ErrHeld naming pid %d and %s", err, os.Getpid(), path)
	}
	// And from another process (flock(1) exits 1 when it cannot lock).
	if _, err := exec.LookPath("flock"); err == nil {
		if err := exec.Command("flock", "-n", path, "true").Run(); err == nil {
			t.Fatal("flock(1) took the lock while it is held")
		}
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l2, err := Acquire(path)
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	l2.Release()
}

func TestPathFromEnv(t *testing.T) {
	t.Setenv(EnvPath, "")
	if Path() != DefaultPath {
		t.Fatalf("Path() = %s, want %s", Path(), DefaultPath)
	}
	t.Setenv(EnvPath, "/tmp/x.lock")
	if Path() != "/tmp/x.lock" {
		t.Fatalf("Path() = %s", Path())
	}
}

// envHold makes the test binary a lock holder (see TestMain).
const envHold = "HOSTLOCK_TEST_HOLD"

func TestMain(m *testing.M) { testkit.Main(m, holdFromEnv) }

// holdFromEnv: with $HOSTLOCK_TEST_HOLD set, the test binary takes that
// lock, prints "held PID", holds it until its stdin ends and exits.
func holdFromEnv() {
	p := os.Getenv(envHold)
	if p == "" {
		return
	}
	l, err := Acquire(p)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("held", os.Getpid())
	io.Copy(io.Discard, os.Stdin)
	l.Release()
	os.Exit(0)
}

// TestRealHeldFromAnotherPidNamespace: a daemon in a container is pid 1
// of its own pid namespace. The refusal must not say "pid 1" (init, here):
// it says the holder is in another pid namespace, its pid there, and its
// pid here.
func TestRealHeldFromAnotherPidNamespace(t *testing.T) {
	testkit.NeedRoot(t)
	_, err := exec.LookPath("unshare")
	testkit.Need(t, err == nil, "unshare (util-linux): %v", err)
	path := filepath.Join(t.TempDir(), "ddiskqos.lock")
	cmd := exec.Command("unshare", "--pid", "--fork", "--kill-child", os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHold+"="+path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("holder: %v", err)
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held 1\n" {
		t.Fatalf("holder in a new pid namespace said %q (%v), want \"held 1\"", line, err)
	}
	// Its pid here: the child unshare forked.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
	here := strings.TrimSpace(string(b))
	if err != nil || here == "" {
		t.Fatalf("children of unshare: %q, %v", b, err)
	}

	_, err = Acquire(path)
	want := "held by another process: a process in another pid namespace (pid 1 there, pid " + here + " here"
	if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Acquire while a process in another pid namespace holds it: %v; want ErrHeld and %q", err, want)
	}
	if strings.Contains(err.Error(), "is held by another process: pid 1") {
		t.Errorf("the refusal names pid 1 as if it were ours: %v", err)
	}
}

// TestHolderOldFile: a lock file of an older daemon holds only a pid.
func TestHolderOldFile(t *testing.T) {
	t.Parallel()
	for file, want := range map[string]string{
		"4242\n": "pid 4242",
		"":       "pid unknown",
		"x\n":    "pid unknown",
	} {
		if got := holder([]byte(file), "/proc"); got != want {
			t.Errorf("holder(%q) = %q, want %q", file, got, want)
		}
	}
	own, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	if got := holder([]byte("77\n"+own+"\n"), "/proc"); got != "pid 77" {
		t.Errorf("holder in our own namespace = %q, want pid 77", got)
	}
	if got := holder([]byte("1\npid:[1]\n"), "/proc"); got != "a process in another pid namespace (pid 1 there; a daemon in a container?)" {
		t.Errorf("holder in a namespace no process here is in = %q", got)
	}
}
