package host

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// KernelRelease is the running kernel's release (uname -r) as
// <Proc>/sys/kernel/osrelease says it.
func KernelRelease(r Roots) (string, error) {
	b, err := os.ReadFile(filepath.Join(r.Proc, "sys", "kernel", "osrelease"))
	if err != nil {
		return "", fmt.Errorf("kernel release: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// KernelVersion parses a release ("6.18.44-fc-v657", "6.1.0-56-amd64")
// into its major and minor numbers.
func KernelVersion(release string) (major, minor int, err error) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return 0, 0, fmt.Errorf("kernel release %q: want MAJOR.MINOR[...]", release)
	}
	end := strings.IndexFunc(parts[1], func(r rune) bool { return r < '0' || r > '9' })
	if end >= 0 {
		parts[1] = parts[1][:end]
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("kernel release %q: want MAJOR.MINOR[...]", release)
	}
	return major, minor, nil
}

// ThrottleForgivesRequestDebt reports whether blk-throttle on this kernel
// release drops a group's request debt, rather than carrying it, when a
// limit write finds that the time since the slice started allowed no
// whole request: 6.16 and later (__tg_update_carryover() guards with
// io_allowed > 0 since the carryover was folded into io_disp); 6.1–6.15
// carry io_allowed − io_disp whatever it is, so a request cap re-armed
// faster than it allows requests starves its group. An unknown release
// counts as carrying (the safe side: re-arming request caps sparingly).
func ThrottleForgivesRequestDebt(release string) bool {
	major, minor, err := KernelVersion(release)
	return err == nil && (major > 6 || major == 6 && minor >= 16)
}
