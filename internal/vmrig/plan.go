// Package vmrig runs one program inside a small throwaway qemu VM that boots a
// cgroup-v2 kernel, so that tests can exercise io.weight, io.bfq.weight,
// io.max, io.stat, io.pressure and iocost for real on a host that has only
// cgroup v1. cmd/vmexec wraps it for `go test -exec`; test/vm/ builds the
// kernel and initramfs it boots.
//
// This file holds the pure part: which host directories the guest sees, the
// job description the guest's init reads, and qemu's command line.
package vmrig

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Share is a host directory that the guest mounts over 9p at the same path.
type Share struct {
	Dir      string // absolute, clean
	Writable bool
}

// alwaysShared is mounted by the guest's init itself (read-only, so that the
// host's dynamically linked tools and libraries work in the guest).
const alwaysShared = "/usr"

// PlanShares returns the directories to share for a program in progDir run in
// cwd: progDir writable (go test keeps the test binary and writes coverage
// and profiles next to it), the Go module containing cwd (or cwd alone when
// there is none) read-only, and the extra writable directories. Directories
// already visible through a share of the same or wider access are dropped;
// the result is ordered so that a parent is mounted before its children.
func PlanShares(progDir, moduleDir string, writable ...string) ([]Share, error) {
	want := []Share{{Dir: progDir, Writable: true}, {Dir: moduleDir}}
	for _, d := range writable {
		want = append(want, Share{Dir: d, Writable: true})
	}
	var errs []error
	for i := range want {
		d := want[i].Dir
		if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("share %q: not an absolute path", d))
			continue
		}
		d = filepath.Clean(d)
		want[i].Dir = d
		if d == "/" || under(d, "/proc") || under(d, "/sys") || under(d, "/dev") || under(d, "/run/vmexec") {
			errs = append(errs, fmt.Errorf("share %s: cannot be shared into the VM (use a directory below /tmp or a project tree)", d))
		}
		if strings.ContainsAny(d, " \t\n'\"\\") {
			errs = append(errs, fmt.Errorf("share %s: paths with blanks, quotes or backslashes are not supported", d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	// Writable first so that a read-only share inside a writable one is dropped.
	slices.SortStableFunc(want, func(a, b Share) int {
		if a.Writable != b.Writable {
			if a.Writable {
				return -1
			}
			return 1
		}
		return len(a.Dir) - len(b.Dir)
	})
	var out []Share
	for _, s := range want {
		// Never make the host's /usr writable: a program there (vmexec
		// sh -c ...) is visible through the read-only /usr share.
		covered := under(s.Dir, alwaysShared)
		for _, o := range out {
			if under(s.Dir, o.Dir) && (o.Writable || !s.Writable) {
				covered = true
			}
		}
		if !covered {
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Share) int {
		if d := len(a.Dir) - len(b.Dir); d != 0 {
			return d
		}
		return strings.Compare(a.Dir, b.Dir)
	})
	return out, nil
}

// under reports whether path is dir or lies below it.
func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// Tag is the 9p mount tag of the i-th share.
func Tag(i int) string { return "vmexec.s" + strconv.Itoa(i) }

// PassEnv reports whether an environment variable of the host is handed to
// the program in the guest: the project's own DDISKQOS_* settings and the
// variables the Go runtime and test binaries read.
func PassEnv(name string) bool {
	switch name {
	case "GOTRACEBACK", "GODEBUG", "GOGC", "GOMEMLIMIT", "GOMAXPROCS", "GORACE", "GOCOVERDIR":
		return true
	}
	return strings.HasPrefix(name, "DDISKQOS_")
}

var shellName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// JobScript is the /run/vmexec/job.sh that the guest's init (test/vm/init)
// sources: it names the shares, the working directory, exports env (KEY=VALUE
// entries; names that are no shell identifiers are dropped) and sets the
// positional parameters to the command.
func JobScript(shares []Share, cwd string, env []string, argv []string) string {
	var b strings.Builder
	b.WriteString("# written by vmexec, read by test/vm/init\nVMEXEC_SHARES=")
	var lines []string
	for i, s := range shares {
		mode := "ro"
		if s.Writable {
			mode = "rw"
		}
		lines = append(lines, Tag(i)+" "+s.Dir+" "+mode)
	}
	b.WriteString(shellQuote(strings.Join(lines, "\n")))
	b.WriteString("\nVMEXEC_CWD=" + shellQuote(cwd) + "\n")
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !shellName.MatchString(k) {
			continue
		}
		b.WriteString("export " + k + "=" + shellQuote(v) + "\n")
	}
	b.WriteString("set --")
	for _, a := range argv {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString("\n")
	return b.String()
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Files are the host paths of one VM run.
type Files struct {
	Ctl     string // directory shared as vmexec.ctl, holds job.sh
	Disk    string // sparse raw image, the guest's /dev/vda
	Burst   string // sparse raw image of the burst disk (Config.Burst)
	Stdout  string // virtio-serial port ddiskqos.stdout
	Stderr  string // virtio-serial port ddiskqos.stderr
	Status  string // virtio-serial port ddiskqos.status
	Console string // the guest's serial console (kernel messages, init errors)
}

// CommandLine is the kernel command line. quiet keeps the slow emulated
// UART idle; the rest saves boot time under TCG: pci=noacpi and
// cryptomgr.notests; rodata=off skips the W+X page-table walk (~0.5 s);
// lpj= skips the second CPU's delay-loop calibration (~0.4 s; x86 delays
// use the TSC anyway); mitigations=off and nokaslr because this VM only
// runs tests; the i8042/8250 options skip probing absent devices.
// norandmaps: every process maps a binary and its libraries at the same
// addresses, so TCG reuses the code it translated for an earlier run of
// the same binary (its translations are keyed by address). A program that
// re-executes itself pays its start-up once, not each time: dockerd, a
// position-independent binary, re-executes itself for each container's
// network namespace and each image layer it unpacks.
const CommandLine = "console=ttyS0 quiet panic=-1 rdinit=/init pci=noacpi cryptomgr.notests " +
	"rodata=off lpj=10000000 mitigations=off nokaslr norandmaps tsc=reliable no_timer_check " +
	"i8042.noaux i8042.nokbd i8042.nopnp 8250.nr_uarts=1"

// QEMUArgs is qemu's argument list (without the binary) for one run.
// Software emulation (TCG): the host's /dev/kvm is a paravirtualised nested
// hypervisor on which a stock kernel aborts or crawls.
func QEMUArgs(c Config, f Files, shares []Share) []string {
	args := []string{
		"-accel", "tcg,thread=multi", "-cpu", "max", "-machine", "pc",
		"-nodefaults", "-no-reboot", "-no-user-config", "-display", "none",
		"-m", c.Mem, "-smp", strconv.Itoa(c.SMP),
	}
	if c.BIOS != "" {
		args = append(args, "-bios", c.BIOS)
	}
	args = append(args,
		"-kernel", c.Kernel, "-initrd", c.Initrd, "-append", CommandLine,
		"-chardev", "file,id=console,path="+qemuOpt(f.Console), "-serial", "chardev:console",
		"-device", "virtio-serial-pci",
	)
	for _, p := range []struct{ id, path string }{
		{"stdout", f.Stdout}, {"stderr", f.Stderr}, {"status", f.Status},
	} {
		args = append(args,
			"-chardev", "file,id="+p.id+",path="+qemuOpt(p.path),
			"-device", "virtserialport,chardev="+p.id+",name=ddiskqos."+p.id)
	}
	fs := func(id, tag, dir string, writable bool) {
		opt := "local,id=" + id + ",path=" + qemuOpt(dir) + ",security_model=none"
		if !writable {
			opt += ",readonly=on"
		}
		args = append(args, "-fsdev", opt, "-device", "virtio-9p-pci,fsdev="+id+",mount_tag="+tag)
	}
	fs("ctl", "vmexec.ctl", f.Ctl, false)
	fs("usr", "vmexec.usr", alwaysShared, false)
	for i, s := range shares {
		fs("s"+strconv.Itoa(i), Tag(i), s.Dir, s.Writable)
	}
	drive := "file=" + qemuOpt(f.Disk) + ",format=raw,if=none,id=disk,cache=unsafe"
	if c.DiskBPS > 0 {
		drive += ",throttling.bps-total=" + strconv.FormatInt(c.DiskBPS, 10)
	}
	args = append(args, "-drive", drive, "-device", "virtio-blk-pci,drive=disk")
	if b := c.Burst; b.IOPS > 0 {
		args = append(args, "-drive", "file="+qemuOpt(f.Burst)+",format=raw,if=none,id=burst,cache=unsafe,"+b.String(),
			"-device", "virtio-blk-pci,drive=burst,serial="+BurstSerial)
	}
	return args
}

// BurstDisk is a test disk that qemu throttles the way a cloud volume with
// burst credits (AWS gp2) behaves: IOPSMax I/Os per second while its
// bucket lasts, IOPS after. qemu's bucket holds IOPSMax*MaxLength I/Os and
// drains at IOPS, so from full a burst at IOPSMax lasts
// IOPSMax*MaxLength/(IOPSMax-IOPS) seconds.
type BurstDisk struct {
	Size      int64 // bytes, sparse
	IOPS      int64 // throttling.iops-total: the baseline
	IOPSMax   int64 // throttling.iops-total-max: the burst rate
	MaxLength int64 // throttling.iops-total-max-length, seconds
}

// String is the disk's qemu throttling options, also handed to the guest
// in BurstEnv.
func (b BurstDisk) String() string {
	return fmt.Sprintf("throttling.iops-total=%d,throttling.iops-total-max=%d,throttling.iops-total-max-length=%d",
		b.IOPS, b.IOPSMax, b.MaxLength)
}

// DefaultBurst: a 256 MiB disk that bursts at up to 200 IOPS from a bucket
// of 6,000 I/Os, then delivers 20 (gp2's 3,000 over 100 to 300, scaled to
// what an emulated guest does steadily on a loaded host): 33 s at 200
// IOPS, 75 s at 100.
var DefaultBurst = BurstDisk{Size: 256 << 20, IOPS: 20, IOPSMax: 200, MaxLength: 30}

// BurstSerial is the burst disk's virtio serial number: the guest finds it
// as the /sys/block/vdX whose serial file says so. BurstEnv names the
// guest's environment variable that holds BurstDisk.String.
const (
	BurstSerial = "ddiskqos-burst"
	BurstEnv    = "DDISKQOS_VM_BURST"
)

// qemuOpt escapes a value inside a qemu option list (a comma is doubled).
func qemuOpt(s string) string { return strings.ReplaceAll(s, ",", ",,") }
