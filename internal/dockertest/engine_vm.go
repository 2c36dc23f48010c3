package dockertest

// Inside the test VM (a pure cgroup-v2 host under software emulation) the
// engine runs as on a systemd host: containerd is started on its own and
// dockerd is pointed at it (--containerd). dockerd 20.10 gives a
// containerd it spawns itself only 15 s to answer, which a loaded machine's
// emulated CPU does not always meet; one it is pointed at gets longer. Both
// start at the same time: each spends its first seconds in the Go runtime's
// and its packages' start-up (seconds of CPU under emulation), which the
// VM's two CPUs do side by side. Should dockerd give up on containerd
// first, it is started again once containerd answers. The VM has no overlay module, so the storage driver
// is vfs (a copy of the one-file image per container). Its root file
// system is the initramfs, where pivot_root(2) is refused:
// DOCKER_RAMDISK=true makes runc move the container's root over / and
// chroot instead, as on any ramdisk-booted host.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// EnvEngineSerial=1 makes StartEngine in the VM start dockerd only once
// its containerd answers, as before the two started together: to compare.
const EnvEngineSerial = "DDISKQOS_ENGINE_SERIAL"

// vmStartTimeout is how long containerd and dockerd may take to answer in
// the VM.
const vmStartTimeout = 10 * time.Minute

// pingTimeout bounds one ping of the engine: normal on the host; in the VM
// a minute, because an emulated guest on a loaded machine can take seconds
// to answer even a ping, and a ping repeated on a short timeout would
// never get its answer.
func pingTimeout(normal time.Duration) time.Duration {
	if testkit.InVM() {
		return time.Minute
	}
	return normal
}

// runTimeout bounds creating and starting one container: a minute, or
// vmStartTimeout in the VM.
func runTimeout() time.Duration {
	if testkit.InVM() {
		return vmStartTimeout
	}
	return time.Minute
}

// vmContainerd is the containerd StartEngine runs beside dockerd in the VM.
type vmContainerd struct {
	cmd    *exec.Cmd
	done   chan struct{}
	begin  time.Time // when it was started
	served bool      // it has been seen answering on its socket
}

func (e *Engine) vmSocket() string { return filepath.Join(e.execRoot, "containerd", "containerd.sock") }

// vmArgs changes dockerd's arguments for the VM: vfs instead of overlay2,
// and the containerd started by startVMContainerd.
func (e *Engine) vmArgs(args []string) []string {
	for i := range args {
		if args[i] == "--storage-driver" && i+1 < len(args) {
			args[i+1] = "vfs"
		}
	}
	return append(args, "--containerd", e.vmSocket(), "--containerd-namespace", "moby")
}

// startVMContainerd starts containerd, once per engine: it outlives
// dockerd restarts, as a system containerd does. It does not wait for it
// to answer (waitVMContainerd does).
func (e *Engine) startVMContainerd(t testing.TB) {
	t.Helper()
	if e.vm.cmd != nil {
		return
	}
	bin, err := exec.LookPath("containerd")
	if err != nil {
		t.Fatalf("containerd: %v", err)
	}
	conf := filepath.Join(e.root, "containerd.toml")
	text := fmt.Sprintf("version = 2\nroot = %q\nstate = %q\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\n[grpc]\n  address = %q\n",
		filepath.Join(e.dataRoot, "containerd"), filepath.Join(e.execRoot, "containerd"), e.vmSocket())
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatalf("containerd config: %v", err)
	}
	logf, err := os.OpenFile(e.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatalf("engine log: %v", err)
	}
	cmd := exec.Command(bin, "--config", conf, "--log-level", "info") // info: timestamped plugin loads, for the start-up profile
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	done := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // Pdeathsig: see start
		defer logf.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			close(done)
			return
		}
		started <- nil
		cmd.Wait()
		close(done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	e.vm.cmd, e.vm.done, e.vm.begin = cmd, done, time.Now()
}

// waitVMContainerd waits until containerd answers on its socket.
func (e *Engine) waitVMContainerd(t testing.TB) {
	t.Helper()
	done, begin := e.vm.done, e.vm.begin
	for {
		select {
		case <-done:
			t.Fatalf("containerd exited while starting%s", e.logTail(40))
		default:
		}
		if containerdServing(e.vmSocket()) {
			t.Logf("containerd answered %s after it was started", time.Since(begin).Round(time.Millisecond))
			e.vm.served = true
			return
		}
		if time.Since(begin) > vmStartTimeout {
			t.Fatalf("containerd does not answer on %s after %s%s", e.vmSocket(), vmStartTimeout, e.logTail(40))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// containerdServing reports whether containerd accepts connections on its
// socket (it listens only once its services are registered).
func containerdServing(sock string) bool {
	c, err := net.DialTimeout("unix", sock, 5*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// stopVMContainerd ends containerd after dockerd, as the engine's cleanup.
func (e *Engine) stopVMContainerd(t testing.TB) {
	t.Helper()
	if e.vm.cmd == nil {
		return
	}
	e.vm.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.vm.done:
	case <-time.After(60 * time.Second):
		t.Errorf("containerd %d did not exit within 60s of SIGTERM: killed", e.vm.cmd.Process.Pid)
		e.vm.cmd.Process.Kill()
		<-e.vm.done
	}
	e.vm.cmd = nil
}
