package iolat

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// UnavailableError says why the sensor cannot run on this host and what
// fixes it.
type UnavailableError struct {
	// Why is the cause in a few words: "no BTF", "no privilege", "old
	// kernel", or "error" for anything else.
	Why string
	// Fix is what to do about it.
	Fix string
	Err error
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("I/O latency sensor unavailable (%s): %v", e.Why, e.Err)
}

func (e *UnavailableError) Unwrap() error { return e.Err }

// Causes of UnavailableError.Why.
const (
	WhyNoBTF       = "no BTF"
	WhyNoPrivilege = "no privilege"
	WhyOldKernel   = "old kernel"
	WhyError       = "error"
)

// errNoBTF marks the kernel's BTF missing or unreadable.
var errNoBTF = errors.New("the kernel's BTF")

// unavailable classifies an error of loading or attaching.
func unavailable(err error) *UnavailableError {
	msg := err.Error()
	switch {
	case errors.Is(err, errNoBTF):
		return &UnavailableError{Why: WhyNoBTF, Err: err,
			Fix: "boot a kernel built with CONFIG_DEBUG_INFO_BTF=y (it provides /sys/kernel/btf/vmlinux: Debian 11, Ubuntu 20.10, RHEL 8.2 and later have it)"}
	case errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES):
		return noPrivilege(err)
	case errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) ||
		errors.Is(err, unix.Errno(524)) /* ENOTSUPP */ || errors.Is(err, unix.EOPNOTSUPP) || strings.Contains(msg, "not found"):
		return &UnavailableError{Why: WhyOldKernel, Err: err,
			Fix: "a kernel with BPF, BTF and the block layer's BTF tracepoints (Linux 5.15 or later with CONFIG_BPF_SYSCALL and CONFIG_DEBUG_INFO_BTF)"}
	}
	return &UnavailableError{Why: WhyError, Err: err, Fix: "see the error; report it if the kernel is Linux 5.15 or later with BTF"}
}

// Probe loads and attaches the sensor and takes it away again: nil when the
// daemon can measure I/O latency here, else an *UnavailableError.
func Probe(o Options) error {
	s, err := Open(o)
	if err != nil {
		return err
	}
	return s.Close()
}

// Capabilities that let a process load and attach tracing programs.
const (
	capSysAdmin = 21
	capPerfmon  = 38
	capBPF      = 39
)

// privileged returns an *UnavailableError unless the process's effective
// capabilities (procRoot/self/status, CapEff) allow loading and attaching
// tracing programs: CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN. An
// unreadable status says nothing: the kernel will.
func privileged(procRoot string) error {
	p := filepath.Join(procRoot, "self", "status")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil
	}
	eff, ok := capEff(string(b))
	if !ok {
		return nil
	}
	has := func(c uint) bool { return eff&(1<<c) != 0 }
	if has(capSysAdmin) || has(capBPF) && has(capPerfmon) {
		return nil
	}
	return noPrivilege(fmt.Errorf("the effective capabilities %#x (%s) have neither CAP_BPF and CAP_PERFMON nor CAP_SYS_ADMIN", eff, p))
}

// noPrivilege is the sensor unavailable for want of privilege. (Checked
// before any bpf(2) call, the error is the capabilities found, not the
// kernel's EPERM: a daemon run without them logs no "operation not
// permitted".)
func noPrivilege(err error) *UnavailableError {
	return &UnavailableError{Why: WhyNoPrivilege, Err: err,
		Fix: "run the daemon as root with CAP_BPF and CAP_PERFMON (CAP_SYS_ADMIN before Linux 5.8) and the bpf system call allowed: " +
			"systemd: CapabilityBoundingSet=CAP_BPF CAP_PERFMON and SystemCallFilter=bpf (as the shipped unit has them); " +
			"Docker 23 and later: --cap-add BPF --cap-add PERFMON; older engines (no CAP_BPF, and bpf refused by their seccomp profile without CAP_SYS_ADMIN): --cap-add SYS_ADMIN; " +
			"Kubernetes: capabilities add BPF and PERFMON, or privileged"}
}

// capEff parses the CapEff line of /proc/<pid>/status:
//
//	CapEff:	000001ffffffffff
func capEff(status string) (uint64, bool) {
	for line := range strings.Lines(status) {
		v, ok := strings.CutPrefix(line, "CapEff:")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		return n, err == nil
	}
	return 0, false
}
