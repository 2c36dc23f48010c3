package cgroupfs

import (
	"fmt"
	"io/fs"
	"syscall"
)

// KeptFile is a small kernel file (procfs, sysfs) kept open and read anew
// from offset 0 at every Read: one pread(2) where os.ReadFile makes six
// system calls or more (open, the poller's registration, stat, reads,
// close) — on a virtual machine those were a third of an idle daemon's
// CPU. A seq_file (/proc/stat, /proc/pressure/io) generates its
// content anew for a read at offset 0.
type KeptFile struct {
	fd   int
	path string
	buf  []byte
}

// OpenKept opens path for repeated reads.
func OpenKept(path string) (*KeptFile, error) {
	fd, err := openRead(path)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return &KeptFile{fd: fd, path: path, buf: make([]byte, 4096)}, nil
}

// Path is the file's path.
func (k *KeptFile) Path() string { return k.path }

// Read returns the whole file as it is now, valid until the next Read.
// The buffer grows until the file fits (a host with many CPUs and
// interrupts has a long /proc/stat), up to 16 MiB.
func (k *KeptFile) Read() ([]byte, error) {
	if k.fd < 0 {
		return nil, fmt.Errorf("read %s: %w", k.path, fs.ErrClosed)
	}
	for {
		n, err := syscall.Pread(k.fd, k.buf, 0)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", k.path, err)
		}
		if n == len(k.buf) && n < 1<<24 {
			k.buf = make([]byte, 2*len(k.buf))
			continue
		}
		return k.buf[:n], nil
	}
}

// Close releases the descriptor.
func (k *KeptFile) Close() error {
	if k.fd < 0 {
		return nil
	}
	err := syscall.Close(k.fd)
	k.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: k.path, Err: err}
	}
	return nil
}
