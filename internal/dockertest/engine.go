package dockertest

// A private Docker engine for tests that must stop or restart the engine:
// the machine's shared engine (/var/run/docker.sock) is used by other tests
// and benchmarks at the same time and must never be restarted.
//
// StartEngine runs the machine's own dockerd binary with every piece of
// state it keeps moved into a temporary directory:
//
//	<root>/docker.sock    --host, the API socket
//	<root>/d              --data-root: images, containers, its containerd's root
//	<root>/x              --exec-root: runc and containerd state, netns mounts
//	<root>/docker.pid     --pidfile
//	<root>/daemon.json    --config-file, so /etc/docker/daemon.json is not read;
//	                      it moves the trust key out of /etc/docker too
//	<root>/dockerd.log    dockerd's and its containerd's output, shown on failure
//
// in a network namespace of its own (CLONE_NEWNET), so nothing it does to
// links, bridges or iptables reaches the host: told --bridge none in the
// host's namespace, dockerd deletes the host's docker0, and every networked
// `docker run` on the machine fails afterwards. Inside, it also runs with
// --bridge none, no iptables, no forwarding and no userland proxy; its API
// socket is a file, reachable from any namespace. It keeps containers
// under a cgroup parent of its
// own, and --live-restore, so containers keep running while the engine is
// down. dockerd 20.10 spawns a containerd of its own (config, socket and
// pid file under the exec root) unless /run/containerd/containerd.sock
// exists; StartEngine checks that it did. Its shims keep their sockets in
// /run/containerd/s, named by a hash of the containerd address, so they do
// not meet the shared engine's.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// DockerdPath is the engine binary StartEngine runs: the machine's own.
const DockerdPath = "/usr/sbin/dockerd"

// systemContainerdSock is where dockerd looks for a system containerd; when
// it exists dockerd uses that one instead of spawning its own.
const systemContainerdSock = "/run/containerd/containerd.sock"

// shimSocketDir is where containerd 1.6's shims put their sockets.
const shimSocketDir = "/run/containerd/s"

// Engine is a private dockerd started by StartEngine.
type Engine struct {
	root         string
	dataRoot     string
	execRoot     string
	sock         string
	pidFile      string
	logPath      string
	configPath   string
	cgroupParent string

	mu         sync.Mutex
	cmd        *exec.Cmd
	done       chan struct{} // closed when cmd has exited
	waitErr    error         // cmd.Wait's result, valid once done is closed
	containerd []int         // pids of the containerds it spawned
	vm         *vmContainerd // inside the test VM: the containerd started beside dockerd (engine_vm.go)
	starts     int
	image      string
}

// StartEngine starts a private dockerd and stops it — and removes its
// containers, mounts, cgroups and directories — when the test ends, also
// when it fails. A missing prerequisite (root, the dockerd binary, the
// containerd and runc it runs) skips the test, or fails it under
// DDISKQOS_REQUIRE_REAL=1.
func StartEngine(t testing.TB) *Engine {
	t.Helper()
	testkit.NeedRoot(t)
	_, err := os.Stat(DockerdPath)
	testkit.Need(t, err == nil, "dockerd binary: %v", err)
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc"} {
		_, err := exec.LookPath(tool)
		testkit.Need(t, err == nil, "%s (run by a private dockerd) not in PATH: %v", tool, err)
	}
	_, err = os.Lstat(systemContainerdSock)
	testkit.Need(t, errors.Is(err, os.ErrNotExist),
		"%s exists: dockerd would use that containerd instead of a private one", systemContainerdSock)

	// Unix socket paths are limited to 108 bytes, and containerd's sit
	// three levels below the root: keep the root short.
	base := os.TempDir()
	if len(base) > 40 {
		base = "/tmp"
	}
	root, err := os.MkdirTemp(base, "ddiskqos-engine-")
	if err != nil {
		t.Fatalf("engine root: %v", err)
	}
	e := &Engine{
		root:         root,
		dataRoot:     filepath.Join(root, "d"),
		execRoot:     filepath.Join(root, "x"),
		sock:         filepath.Join(root, "docker.sock"),
		pidFile:      filepath.Join(root, "docker.pid"),
		logPath:      filepath.Join(root, "dockerd.log"),
		configPath:   filepath.Join(root, "daemon.json"),
		cgroupParent: fmt.Sprintf("/ddiskqos-engine-%d-%d", os.Getpid(), uniq.Add(1)),
	}
	if testkit.InVM() {
		e.vm = &vmContainerd{}
	}
	t.Cleanup(func() { e.cleanup(t) })
	conf := fmt.Sprintf("{\"deprecated-key-path\": %q}\n", filepath.Join(root, "key.json"))
	if err := os.WriteFile(e.configPath, []byte(conf), 0o600); err != nil {
		t.Fatalf("engine config: %v", err)
	}
	e.start(t)
	return e
}

// Host is the engine's address for DOCKER_HOST or client.WithHost.
func (e *Engine) Host() string { return "unix://" + e.sock }

// Root is the directory holding all of the engine's state.
func (e *Engine) Root() string { return e.root }

// CgroupParent is the cgroup (in every hierarchy) the engine puts its
// containers under, e.g. "/ddiskqos-engine-123-1".
func (e *Engine) CgroupParent() string { return e.cgroupParent }

// Pid is the running dockerd's pid, 0 when it is stopped.
func (e *Engine) Pid() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd == nil {
		return 0
	}
	return e.cmd.Process.Pid
}

// ContainerdPid is the pid of the containerd the running dockerd spawned,
// 0 when it is stopped.
func (e *Engine) ContainerdPid() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cmd == nil || len(e.containerd) == 0 {
		return 0
	}
	return e.containerd[len(e.containerd)-1]
}

// Client returns a client of the engine that negotiates the API version
// (now, while the engine runs), closed when the test ends. It keeps
// working across Restart: every request dials the socket afresh.
func (e *Engine) Client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.New(client.WithHost(e.Host()))
	if err != nil {
		t.Fatalf("client of %s: %v", e.Host(), err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout(10*time.Second))
	defer cancel()
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		t.Fatalf("private engine at %s does not answer: %v%s", e.Host(), err, e.logTail(40))
	}
	return c
}

// Image imports the ddiskqos binary of this source tree into the engine
// (once per engine: the image lives in its data root, across restarts) and
// returns its tag.
func (e *Engine) Image(t testing.TB) string {
	t.Helper()
	bin := Binary(t)
	e.mu.Lock()
	tag := e.image
	e.mu.Unlock()
	if tag != "" {
		return tag
	}
	tag = "ddiskqos-test:engine"
	c := e.Client(t)
	start := time.Now()
	if err := importImage(c, tag, bin); err != nil {
		t.Fatal(err)
	}
	t.Logf("imported image %s into the private engine in %s", tag, time.Since(start).Round(time.Millisecond))
	e.mu.Lock()
	e.image = tag
	e.mu.Unlock()
	return tag
}

// Stop ends dockerd with SIGTERM and waits for it and its containerd to
// exit. With --live-restore the containers keep running. It returns how
// long dockerd took to exit.
func (e *Engine) Stop(t testing.TB) time.Duration {
	t.Helper()
	took, err := e.stop(60 * time.Second)
	if err != nil {
		t.Fatalf("stop private engine: %v%s", err, e.logTail(40))
	}
	return took
}

// Start starts a stopped dockerd again with the same roots and returns how
// long it took until it answered a ping.
func (e *Engine) Start(t testing.TB) time.Duration {
	t.Helper()
	start := time.Now()
	e.start(t)
	return time.Since(start)
}

// Restart stops dockerd and starts it again with the same roots, and
// returns how long it was stopping and how long starting took (until it
// answered a ping).
func (e *Engine) Restart(t testing.TB) (stopping, starting time.Duration) {
	t.Helper()
	stopping = e.Stop(t)
	start := time.Now()
	e.start(t)
	return stopping, time.Since(start)
}

func (e *Engine) args() []string {
	args := []string{
		"--config-file", e.configPath,
		"--host", e.Host(),
		"--data-root", e.dataRoot,
		"--exec-root", e.execRoot,
		"--pidfile", e.pidFile,
		"--bridge", "none",
		"--iptables=false",
		"--ip6tables=false",
		"--ip-masq=false",
		"--ip-forward=false",
		"--userland-proxy=false",
		"--cgroup-parent", e.cgroupParent,
		"--exec-opt", "native.cgroupdriver=cgroupfs",
		"--storage-driver", "overlay2",
		"--live-restore",
	}
	if e.vm != nil {
		args = e.vmArgs(args)
	}
	return args
}

// start runs dockerd and waits until it answers a ping and has spawned its
// own containerd. In the VM it starts the containerd dockerd is pointed at
// and dockerd at the same time (see engine_vm.go).
func (e *Engine) start(t testing.TB) {
	t.Helper()
	e.mu.Lock()
	if e.cmd != nil {
		e.mu.Unlock()
		t.Fatal("private engine already running")
	}
	e.starts++
	n := e.starts
	e.mu.Unlock()
	if e.vm != nil {
		e.startVMContainerd(t)
		if os.Getenv(EnvEngineSerial) == "1" {
			e.waitVMContainerd(t)
		}
	}
	for {
		up, err := e.waitUp(t, e.launch(t, n))
		if up {
			break
		}
		// dockerd gives the containerd it is pointed at a limited time to
		// answer: one that had not answered yet when dockerd started may
		// answer later on a slow machine. Start dockerd again once it has.
		if e.vm != nil && !e.vm.served {
			t.Logf("dockerd exited while containerd was still starting (%v); starting dockerd again once containerd answers", err)
			e.waitVMContainerd(t)
			continue
		}
		t.Fatalf("private dockerd exited while starting: %v%s", err, e.logTail(60))
	}
	if e.vm != nil {
		return // its containerd is the one startVMContainerd started
	}
	pid, err := e.ownContainerd(e.Pid())
	if err != nil {
		t.Fatalf("private dockerd: %v%s", err, e.logTail(40))
	}
	e.mu.Lock()
	e.containerd = append(e.containerd, pid)
	e.mu.Unlock()
}

// launch starts dockerd (start n of this engine) and returns the channel
// closed when it has exited.
func (e *Engine) launch(t testing.TB, n int) chan struct{} {
	t.Helper()
	logf, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("engine log: %v", err)
	}
	fmt.Fprintf(logf, "=== ddiskqos test: start %d of dockerd at %s: %s %s\n",
		n, time.Now().Format(time.RFC3339Nano), DockerdPath, strings.Join(e.args(), " "))
	cmd := exec.Command(DockerdPath, e.args()...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if e.vm != nil {
		cmd.Env = append(os.Environ(), "DOCKER_RAMDISK=true") // see engine_vm.go
	}
	// Its own process group: a ^C to the test reaches the test, whose
	// cleanup stops the engine in order. Pdeathsig: should the test
	// process die without cleaning up, dockerd is told to stop. Its own
	// network namespace: see the package comment.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Cloneflags: syscall.CLONE_NEWNET}
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that forked exits, not the
		// process: hold this thread until dockerd has exited.
		runtime.LockOSThread()
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		err := cmd.Wait()
		e.mu.Lock()
		e.waitErr = err
		e.mu.Unlock()
		close(done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("start %s: %v", DockerdPath, err)
	}
	e.mu.Lock()
	e.cmd, e.done = cmd, done
	e.mu.Unlock()
	return done
}

// waitUp waits until the dockerd just launched answers a ping (true), or
// has exited (false, with its exit error). It fails the test when dockerd
// does not answer in time.
func (e *Engine) waitUp(t testing.TB, done chan struct{}) (bool, error) {
	t.Helper()
	c, err := client.New(client.WithHost(e.Host()))
	if err != nil {
		t.Fatalf("client of %s: %v", e.Host(), err)
	}
	defer c.Close()
	within := 60 * time.Second
	if e.vm != nil {
		within = vmStartTimeout
	}
	begin := time.Now()
	deadline := begin.Add(within)
	for {
		select {
		case <-done:
			e.mu.Lock()
			err := e.waitErr
			e.cmd = nil
			e.mu.Unlock()
			return false, err
		default:
		}
		// Before dockerd listens a ping fails at once (no socket, or
		// refused); the timeout bounds only an answer that is slow.
		ctx, cancel := context.WithTimeout(context.Background(), pingTimeout(time.Second))
		_, err := c.Ping(ctx, client.PingOptions{})
		cancel()
		if err == nil {
			if e.vm != nil {
				t.Logf("dockerd answered after %s", time.Since(begin).Round(time.Millisecond))
			}
			return true, nil
		}
		if time.Now().After(deadline) {
			t.Fatalf("private dockerd does not answer at %s after %s: %v%s", e.Host(), within, err, e.logTail(60))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ownContainerd returns the pid of the containerd dockerd spawned, and
// fails unless it is a child of dockerd running on the exec root's config.
func (e *Engine) ownContainerd(dockerd int) (int, error) {
	pidPath := filepath.Join(e.execRoot, "containerd", "containerd.pid")
	text, err := os.ReadFile(pidPath)
	if err != nil {
		return 0, fmt.Errorf("no containerd of its own: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(text)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", pidPath, err)
	}
	args, err := cmdline(pid)
	if err != nil {
		return 0, fmt.Errorf("containerd %d: %w", pid, err)
	}
	conf := filepath.Join(e.execRoot, "containerd", "containerd.toml")
	if !slices.Contains(args, conf) {
		return 0, fmt.Errorf("containerd %d runs %q, not on %s", pid, args, conf)
	}
	if pp := parentPid(pid); pp != dockerd {
		return 0, fmt.Errorf("containerd %d is a child of %d, not of dockerd %d", pid, pp, dockerd)
	}
	return pid, nil
}

func (e *Engine) stop(within time.Duration) (time.Duration, error) {
	e.mu.Lock()
	cmd, done := e.cmd, e.done
	procs := slices.Clone(e.containerd)
	e.mu.Unlock()
	if cmd == nil {
		return 0, errors.New("not running")
	}
	start := time.Now()
	var errs []error
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		errs = append(errs, fmt.Errorf("SIGTERM dockerd %d: %w", cmd.Process.Pid, err))
	}
	select {
	case <-done:
	case <-time.After(within):
		errs = append(errs, fmt.Errorf("dockerd %d did not exit within %s of SIGTERM: killed", cmd.Process.Pid, within))
		cmd.Process.Kill()
		<-done
	}
	took := time.Since(start)
	e.mu.Lock()
	e.cmd, e.done = nil, nil
	e.containerd = nil
	e.mu.Unlock()
	// dockerd stops the containerd it spawned; make sure.
	for _, pid := range procs {
		if !waitGone(pid, 15*time.Second) {
			errs = append(errs, fmt.Errorf("containerd %d still running 15s after dockerd exited: killed", pid))
			killIf(pid, e.execRoot)
		}
	}
	return took, errors.Join(errs...)
}

// Log returns the engine's log so far: dockerd's and its containerd's
// timestamped lines, with a line before each start of dockerd.
func (e *Engine) Log() string {
	data, err := os.ReadFile(e.logPath)
	if err != nil {
		return fmt.Sprintf("(no dockerd log: %v)", err)
	}
	return string(data)
}

// logTail returns the last n lines of the engine's log, for messages.
func (e *Engine) logTail(n int) string {
	data, err := os.ReadFile(e.logPath)
	if err != nil {
		return fmt.Sprintf("\n(no dockerd log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("\n--- last %d lines of %s ---\n%s", len(lines), e.logPath, strings.Join(lines, "\n"))
}
