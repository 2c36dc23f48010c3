// Package loopdev attaches a file as a brand-new loop device and removes
// the device again. It is the one loop-device maker of the tests and the
// benchmarks.
//
// A new device (LOOP_CTL_ADD at a free index from 64 to 1023) has a new request
// queue, so every user meets the kernel as a fresh machine would: loop0..7,
// which `losetup --find` hands out, keep per-queue state — the scheduler,
// blk-throttle's set-up — from whatever used them before, and an earlier
// run's leftovers would change what a later one measures.
package loopdev

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// FirstIndex is the lowest index Attach uses: above the loop0..7 that
// distributions create at boot and `losetup --find` hands out.
const FirstIndex = 64

// Device is an attached loop device.
type Device struct {
	Path   string // /dev/loopN
	Name   string // loopN
	Index  int
	Direct bool // the device reads its file with direct I/O
}

// Attach creates a new loop device and attaches file to it, with direct
// I/O when direct is set and the file's filesystem allows it (tmpfs does
// not: then the device is buffered and Device.Direct is false). On error
// nothing is left behind.
func Attach(file string, direct bool) (*Device, error) {
	if _, err := exec.LookPath("losetup"); err != nil {
		return nil, fmt.Errorf("losetup (util-linux) not found: %w", err)
	}
	idx, err := add()
	if err != nil {
		return nil, err
	}
	d := &Device{Path: fmt.Sprintf("/dev/loop%d", idx), Name: fmt.Sprintf("loop%d", idx), Index: idx}
	// devtmpfs creates the node; wait for it briefly.
	for i := 0; ; i++ {
		if _, err := os.Stat(d.Path); err == nil {
			break
		}
		if i == 200 {
			return nil, errors.Join(fmt.Errorf("%s did not appear after LOOP_CTL_ADD", d.Path), remove(idx))
		}
		time.Sleep(10 * time.Millisecond)
	}
	var out []byte
	if direct {
		out, err = exec.Command("losetup", "--direct-io=on", d.Path, file).CombinedOutput()
		d.Direct = err == nil
	}
	if !d.Direct {
		var out2 []byte
		out2, err = exec.Command("losetup", d.Path, file).CombinedOutput()
		out = append(out, out2...)
	}
	if err != nil {
		return nil, errors.Join(fmt.Errorf("losetup %s %s: %w: %s", d.Path, file, err, strings.TrimSpace(string(out))), remove(idx))
	}
	if d.Direct {
		// losetup may accept --direct-io=on and fall back silently.
		b, err := os.ReadFile(filepath.Join("/sys/block", d.Name, "loop", "dio"))
		d.Direct = err == nil && strings.TrimSpace(string(b)) == "1"
	}
	return d, nil
}

// Detach detaches the file and removes the device. A device another
// process still holds open (a lazily unmounted filesystem) is detached by
// the kernel when the last user goes; removing it is then retried for a
// second before Detach gives up and says so.
func (d *Device) Detach() error {
	if out, err := exec.Command("losetup", "--detach", d.Path).CombinedOutput(); err != nil {
		if _, serr := os.Stat(filepath.Join("/sys/block", d.Name, "loop")); serr == nil {
			return fmt.Errorf("losetup --detach %s: %w: %s", d.Path, err, strings.TrimSpace(string(out)))
		}
	}
	return remove(d.Index)
}

func add() (int, error) {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return 0, fmt.Errorf("open /dev/loop-control: %w", err)
	}
	defer ctl.Close()
	// The search starts at a place of this process's own (its pid) and
	// goes round: two test binaries running at once (go test runs
	// packages in parallel) then rarely take an index the other has just
	// freed. In one CI run here two packages' tests met on loop65 in turn
	// and the second found its "fresh" disk's blk-throttle already set up
	// (most likely a rule the first wrote for 7:65 late in its clean-up;
	// not traced).
	const n = 1024 - FirstIndex
	start := os.Getpid() % n
	for i := range n {
		idx := FirstIndex + (start+i)%n
		if _, err := os.Stat(fmt.Sprintf("/sys/block/loop%d", idx)); err == nil {
			continue
		}
		n, err := ioctl(int(ctl.Fd()), unix.LOOP_CTL_ADD, idx)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("LOOP_CTL_ADD %d: %w", idx, err)
		}
		return n, nil
	}
	return 0, fmt.Errorf("no free loop device index in %d..1023", FirstIndex)
}

func remove(idx int) error {
	ctl, err := os.OpenFile("/dev/loop-control", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("open /dev/loop-control: %w", err)
	}
	defer ctl.Close()
	for try := 0; ; try++ {
		_, err := ioctl(int(ctl.Fd()), unix.LOOP_CTL_REMOVE, idx)
		if err == nil || err == unix.ENODEV || err == unix.ENXIO {
			return nil
		}
		if try == 50 {
			return fmt.Errorf("LOOP_CTL_REMOVE %d: %w", idx, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ioctl is an ioctl whose argument is a plain integer and whose result is
// the return value.
func ioctl(fd int, req uint, arg int) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), uintptr(arg))
	if errno != 0 {
		return 0, errno
	}
	return int(r), nil
}
