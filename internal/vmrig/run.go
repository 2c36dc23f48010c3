package vmrig

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Config describes the VM.
type Config struct {
	QEMU     string // qemu-system-x86_64 binary
	Kernel   string // vmlinux (PVH) or bzImage
	Initrd   string // initramfs built by test/vm/assets.sh
	BIOS     string // qemu -bios; "": qemu's default (SeaBIOS)
	Mem      string // qemu -m, e.g. 1024M
	SMP      int    // virtual CPUs
	DiskSize int64  // bytes of the sparse test disk /dev/vda
	DiskBPS  int64  // qemu throttling.bps-total of the test disk; 0: none
	// Burst is the second test disk, throttled like a cloud volume with
	// burst credits; a zero Burst attaches none.
	Burst   BurstDisk
	Timeout time.Duration // whole run of one boot, boot included; 0: none
	// BootTimeout is how long a boot may take to start the program; a VM
	// that has not started it by then is killed and booted once more.
	// 0: DefaultBootTimeout.
	BootTimeout time.Duration
	TempDir     string    // where the run's files go; "": os.TempDir()
	Log         io.Writer // qemu command and timings; nil: none
}

// Job is the program to run in the guest.
type Job struct {
	Path     string   // absolute path of the program
	Args     []string // arguments after the program
	Dir      string   // absolute working directory, visible at the same path in the guest
	Env      []string // KEY=VALUE set in the guest (see PassEnv)
	Writable []string // further host directories the program may write to
	Stdout   io.Writer
	Stderr   io.Writer
}

// SetupError says that the VM could not be prepared; Path names the file or
// directory at fault.
type SetupError struct {
	Path string
	Err  error
}

func (e *SetupError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// ErrMissingAsset is wrapped by a SetupError when qemu, the kernel or the
// initramfs is not there: test/vm/assets.sh provides them.
var ErrMissingAsset = errors.New("missing; run test/vm/assets.sh")

// VMError says that the VM did not run the program to its end: it did not
// boot, its init failed, it timed out or it was interrupted.
type VMError struct {
	Msg        string
	Err        error  // ErrTimeout, ErrBootTimeout, context.Canceled or nil
	ConsoleLog string // last lines of the guest's console, if any
	QEMUStderr string
}

func (e *VMError) Unwrap() error { return e.Err }

func (e *VMError) Error() string {
	var b strings.Builder
	b.WriteString(e.Msg)
	if s := strings.TrimSpace(e.QEMUStderr); s != "" {
		b.WriteString("\nqemu: " + s)
	}
	if s := strings.TrimSpace(e.ConsoleLog); s != "" {
		b.WriteString("\nguest console (last lines):\n" + s)
	}
	return b.String()
}

// ErrTimeout is wrapped by the error of a run that exceeded Config.Timeout.
var ErrTimeout = errors.New("timed out")

// ErrBootTimeout is wrapped by the error of a run whose VM did not start
// the program within Config.BootTimeout, twice.
var ErrBootTimeout = errors.New("did not start the program in time")

// DefaultBootTimeout: a boot to the program takes seconds under software
// emulation, a minute on a loaded host; a clean-clone CI run once saw a
// VM run 31 minutes without starting its program (qemu busy on both CPUs,
// nothing on the console), and the package failed.
const DefaultBootTimeout = 5 * time.Minute

// CacheDir is where test/vm/assets.sh leaves the kernel and initramfs:
// $DDISKQOS_VM_CACHE, else $HOME/.cache/ddiskqos/vm.
func CacheDir() (string, error) {
	if d := os.Getenv("DDISKQOS_VM_CACHE"); d != "" {
		return d, nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no VM cache directory: set DDISKQOS_VM_CACHE or HOME: %w", err)
	}
	return filepath.Join(home, ".cache", "ddiskqos", "vm"), nil
}

// DefaultConfig is the VM that cmd/vmexec boots without flags.
func DefaultConfig() (Config, error) {
	cache, err := CacheDir()
	if err != nil {
		return Config{}, err
	}
	return Config{
		QEMU:     "qemu-system-x86_64",
		BIOS:     DefaultBIOS(),
		Kernel:   filepath.Join(cache, "kernel"),
		Initrd:   filepath.Join(cache, "initramfs"),
		Mem:      "1024M",
		SMP:      2,
		DiskSize: 1 << 30,
		DiskBPS:  100 << 20,
		Burst:    DefaultBurst,
		Timeout:  10 * time.Minute,
	}, nil
}

// QBoot is qemu's minimal firmware (Debian's qemu-system-data ships it); it
// boots about 0.5 s faster than SeaBIOS under TCG.
const QBoot = "/usr/share/qemu/qboot.rom"

// DefaultBIOS is QBoot if it is installed, else "" (SeaBIOS).
func DefaultBIOS() string {
	if _, err := os.Stat(QBoot); err == nil {
		return QBoot
	}
	return ""
}

// CheckAssets reports, as SetupErrors wrapping ErrMissingAsset, which of
// qemu, the kernel and the initramfs are missing.
func CheckAssets(c Config) error {
	var errs []error
	if _, err := exec.LookPath(c.QEMU); err != nil {
		errs = append(errs, &SetupError{Path: c.QEMU, Err: ErrMissingAsset})
	}
	for _, p := range []string{c.Kernel, c.Initrd} {
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, &SetupError{Path: p, Err: ErrMissingAsset})
		}
	}
	return errors.Join(errs...)
}

// Run boots the VM, runs the job in it, copies its output to job.Stdout and
// job.Stderr as it comes and returns its exit status. An error means the
// program's status is unknown (SetupError, VMError). Run removes every file it
// made and leaves no qemu process behind, also when ctx is cancelled.
//
// A VM that has not started the program within Config.BootTimeout is
// killed and booted once more; the program had not run, so nothing of it
// is repeated.
func Run(ctx context.Context, c Config, job Job) (int, error) {
	code, err := runOnce(ctx, c, job)
	if errors.Is(err, ErrBootTimeout) && ctx.Err() == nil {
		if c.Log != nil {
			fmt.Fprintf(c.Log, "vmexec: %v; booting it once more\n", err)
		}
		code, err = runOnce(ctx, c, job)
	}
	return code, err
}

// runOnce is one boot of Run.
func runOnce(ctx context.Context, c Config, job Job) (int, error) {
	if err := CheckAssets(c); err != nil {
		return 0, err
	}
	shares, err := PlanShares(filepath.Dir(job.Path), ModuleRoot(job.Dir), job.Writable...)
	if err != nil {
		return 0, err
	}
	tmp, err := os.MkdirTemp(c.TempDir, "vmexec-")
	if err != nil {
		return 0, &SetupError{Path: c.TempDir, Err: err}
	}
	defer os.RemoveAll(tmp)
	f := Files{
		Ctl:     filepath.Join(tmp, "ctl"),
		Disk:    filepath.Join(tmp, "disk.img"),
		Burst:   filepath.Join(tmp, "burst.img"),
		Stdout:  filepath.Join(tmp, "stdout"),
		Stderr:  filepath.Join(tmp, "stderr"),
		Status:  filepath.Join(tmp, "status"),
		Console: filepath.Join(tmp, "console"),
	}
	if err := os.Mkdir(f.Ctl, 0o755); err != nil {
		return 0, &SetupError{Path: f.Ctl, Err: err}
	}
	if c.Burst.IOPS > 0 {
		job.Env = append(slices.Clone(job.Env), BurstEnv+"="+c.Burst.String())
	}
	script := JobScript(shares, job.Dir, job.Env, append([]string{job.Path}, job.Args...))
	if err := os.WriteFile(filepath.Join(f.Ctl, "job.sh"), []byte(script), 0o644); err != nil {
		return 0, &SetupError{Path: f.Ctl, Err: err}
	}
	if err := sparseFile(f.Disk, c.DiskSize); err != nil {
		return 0, err
	}
	if c.Burst.IOPS > 0 {
		if err := sparseFile(f.Burst, c.Burst.Size); err != nil {
			return 0, err
		}
	}
	// Open the port files before qemu does; qemu appends nothing but
	// truncates on open, which is harmless on empty files.
	var tails [3]*os.File
	for i, p := range []string{f.Stdout, f.Stderr, f.Status} {
		fh, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return 0, &SetupError{Path: p, Err: err}
		}
		defer fh.Close()
		tails[i] = fh
	}

	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.Timeout, ErrTimeout)
		defer cancel()
	}
	args := QEMUArgs(c, f, shares)
	cmd := exec.CommandContext(ctx, c.QEMU, args...)
	var qemuErr bytes.Buffer
	cmd.Stdout = &qemuErr
	cmd.Stderr = &qemuErr
	// qemu dies with us even when we are killed without a chance to clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	if c.Log != nil {
		fmt.Fprintf(c.Log, "vmexec: %s %s\n", c.QEMU, quoteArgs(args))
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, &SetupError{Path: c.QEMU, Err: err}
	}
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()

	st := &statusReader{}
	pump := func() {
		copyNew(tails[0], job.Stdout)
		copyNew(tails[1], job.Stderr)
		copyNew(tails[2], st)
		if st.started && st.bootTime == 0 {
			st.bootTime = time.Since(t0)
			if c.Log != nil {
				fmt.Fprintf(c.Log, "vmexec: boot to program start %.2fs\n", st.bootTime.Seconds())
			}
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	boot := cmp.Or(c.BootTimeout, DefaultBootTimeout)
	hung := false
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-waitc:
			break loop
		case <-tick.C:
			pump()
			if !st.started && !hung && time.Since(t0) > boot {
				hung = true
				cmd.Process.Kill()
			}
		}
	}
	pump()
	total := time.Since(t0)
	if c.Log != nil {
		fmt.Fprintf(c.Log, "vmexec: qemu ran %.2fs\n", total.Seconds())
	}

	switch {
	case st.exited:
		return st.code, nil
	case hung && !st.started:
		return 0, &VMError{Msg: fmt.Sprintf("vm %v within %v", ErrBootTimeout, boot), Err: ErrBootTimeout,
			ConsoleLog: tailFile(f.Console, 20), QEMUStderr: qemuErr.String()}
	case ctx.Err() != nil:
		e := &VMError{Msg: "vm interrupted", Err: context.Canceled}
		if errors.Is(context.Cause(ctx), ErrTimeout) {
			e.Msg, e.Err = fmt.Sprintf("vm %v after %v", ErrTimeout, c.Timeout), ErrTimeout
		}
		if !st.started {
			e.Msg += " (the program had not started)"
			e.ConsoleLog = tailFile(f.Console, 20)
		}
		return 0, e
	case st.errMsg != "":
		return 0, &VMError{Msg: "vm init failed: " + st.errMsg, ConsoleLog: tailFile(f.Console, 20), QEMUStderr: qemuErr.String()}
	case st.started:
		return 0, &VMError{Msg: fmt.Sprintf("vm stopped before the program reported its exit status (qemu: %v)", exitText(waitErr)),
			ConsoleLog: tailFile(f.Console, 20), QEMUStderr: qemuErr.String()}
	default:
		return 0, &VMError{Msg: fmt.Sprintf("vm did not boot to the program (qemu: %v, kernel %s, initramfs %s)", exitText(waitErr), c.Kernel, c.Initrd),
			ConsoleLog: tailFile(f.Console, 20), QEMUStderr: qemuErr.String()}
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// ModuleRoot is the directory of the go.mod that governs dir, or dir itself.
func ModuleRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if d == filepath.Dir(d) {
			return dir
		}
	}
}

func sparseFile(path string, size int64) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return &SetupError{Path: path, Err: err}
	}
	if err := fh.Truncate(size); err != nil {
		fh.Close()
		return &SetupError{Path: path, Err: fmt.Errorf("truncate to %d bytes: %w", size, err)}
	}
	if err := fh.Close(); err != nil {
		return &SetupError{Path: path, Err: err}
	}
	return nil
}

// copyNew copies what was appended to f since the last call.
func copyNew(f *os.File, w io.Writer) {
	var buf [64 << 10]byte
	for {
		n, err := f.Read(buf[:])
		if n > 0 {
			w.Write(buf[:n])
		}
		if err != nil || n == 0 {
			return
		}
	}
}

// statusReader parses the ddiskqos.status port:
//
//	start
//	exit 0
//
// or "error MSG" when the guest's init could not run the program.
type statusReader struct {
	partial  []byte
	started  bool
	exited   bool
	code     int
	errMsg   string
	bootTime time.Duration
}

func (s *statusReader) Write(p []byte) (int, error) {
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := strings.TrimSpace(string(s.partial[:i]))
		s.partial = s.partial[i+1:]
		key, val, _ := strings.Cut(line, " ")
		switch key {
		case "start":
			s.started = true
		case "exit":
			if n, err := strconv.Atoi(val); err == nil {
				s.exited, s.code = true, n
			} else {
				s.errMsg = "bad status line " + strconv.Quote(line)
			}
		case "error":
			s.errMsg = val
		}
	}
}

func tailFile(path string, n int) string {
	fh, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer fh.Close()
	var lines []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		lines = append(lines, strings.TrimRight(sc.Text(), "\r"))
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

func quoteArgs(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?;&|<>()") {
			a = shellQuote(a)
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}
