// Command vmexec runs a program inside a small qemu VM with a cgroup-v2
// kernel and exits with the program's exit status. It is made to be used as
// `go test -exec`:
//
//	test/vm/assets.sh                       # once: qemu, kernel, initramfs
//	go build -o bin/vmexec ./cmd/vmexec
//	go test -exec "$PWD/bin/vmexec" ./internal/... -run V2
//
// The program's directory (writable) and the Go module around the working
// directory (read-only) appear in the VM at their host paths; the working
// directory is the same; TMPDIR and HOME are a tmpfs /tmp. The VM has a
// fresh sparse test disk /dev/vda (DDISKQOS_VM_DISK), throttled by qemu, and
// sets DDISKQOS_IN_VM=1. Variables named DDISKQOS_* and the Go runtime's
// (GOTRACEBACK, GODEBUG, ...) are passed through. See test/vm/README.md.
//
// Exit status: the program's; 124 when the VM timed out; 125 when the VM
// could not be set up or did not run the program to its end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ddiskqos/ddiskqos/internal/bytesize"
	"github.com/ddiskqos/ddiskqos/internal/vmrig"
)

func main() { os.Exit(run()) }

func run() int {
	def, err := vmrig.DefaultConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return 125
	}

	fs := flag.NewFlagSet("vmexec", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: vmexec [flags] PROGRAM [ARGS...]\n\n"+
			"Runs PROGRAM in a qemu VM with a cgroup-v2 kernel; usable as go test -exec.\n\n")
		fs.PrintDefaults()
	}
	diskSize := fs.String("disk-size", "1G", "size of the sparse test disk /dev/vda (k, M, G, T or KiB..TiB: powers of 1024; kB, MB, GB, TB: of 1000)")
	diskBPS := fs.Int64("disk-bps", def.DiskBPS, "throttle the test disk to this many bytes/s, reads and writes together (0: unthrottled)")
	mem := fs.String("mem", def.Mem, "guest memory (qemu -m)")
	smp := fs.Int("smp", def.SMP, "guest CPUs")
	timeout := fs.Duration("timeout", def.Timeout, "kill the VM after this long, boot included (0: never); a VM that has not started the program within 5m is killed and booted once more")
	kernel := fs.String("kernel", def.Kernel, "guest kernel (vmlinux or bzImage)")
	initrd := fs.String("initrd", def.Initrd, "guest initramfs (built by test/vm/assets.sh)")
	qemu := fs.String("qemu", def.QEMU, "qemu binary")
	bios := fs.String("bios", def.BIOS, "qemu firmware (empty: SeaBIOS)")
	verbose := fs.Bool("v", false, "print qemu's command line and boot timing to stderr")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}

	size, err := bytesize.Parse(*diskSize)
	if err == nil && size <= 0 {
		err = fmt.Errorf("size %q: want a positive number of bytes", *diskSize)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: -disk-size: %v\n", err)
		return 2
	}
	if *smp < 1 || *diskBPS < 0 {
		fmt.Fprintln(os.Stderr, "vmexec: -smp must be >= 1 and -disk-bps >= 0")
		return 2
	}
	prog, err := programPath(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		return 125
	}
	cwd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: working directory: %v\n", err)
		return 125
	}

	cfg := vmrig.Config{
		QEMU: *qemu, BIOS: *bios, Kernel: *kernel, Initrd: *initrd,
		Mem: *mem, SMP: *smp, DiskSize: size, DiskBPS: *diskBPS, Burst: def.Burst, Timeout: *timeout,
	}
	if *verbose {
		cfg.Log = os.Stderr
	}
	job := vmrig.Job{
		Path: prog, Args: fs.Args()[1:], Dir: cwd,
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
	for _, kv := range os.Environ() {
		name, val, _ := strings.Cut(kv, "=")
		if vmrig.PassEnv(name) {
			job.Env = append(job.Env, kv)
			if name == "GOCOVERDIR" && filepath.IsAbs(val) {
				job.Writable = append(job.Writable, val)
			}
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	code, err := vmrig.Run(ctx, cfg, job)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vmexec: %v\n", err)
		if errors.Is(err, vmrig.ErrTimeout) {
			return 124
		}
		return 125
	}
	return code
}

// programPath makes the program's path absolute, looking a bare name up in PATH.
func programPath(name string) (string, error) {
	p := name
	if !strings.Contains(name, "/") {
		var err error
		if p, err = exec.LookPath(name); err != nil {
			return "", err
		}
	}
	p, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("program: %w", err)
	}
	return p, nil
}
