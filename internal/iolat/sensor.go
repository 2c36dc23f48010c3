// Package iolat is the I/O latency sensor: BPF programs on the block
// layer's BTF tracepoints time every request and add it up in the kernel
// per (cgroup, disk, read/write) — count, bytes, in-flight, a log-linear
// histogram of the time each took — and a reader takes what changed from
// those tables once per tick.
//
// iolat.c is the kernel half (see its comment for what is counted and how
// it is bounded); `go generate` compiles it with bpf2go into iolat_bpfel.o
// and iolat_bpfel.go, which are committed, so building needs Go alone
// (TestGeneratedCurrent fails when they are stale). sensor.go loads and
// attaches it, reader.go reads it, hist.go is the histogram's arithmetic,
// probe.go says why it cannot run where it cannot.
package iolat

//go:generate go tool bpf2go -target bpfel -no-global-types iolat iolat.c

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// DefaultMaxKeys bounds the kernel's table of aggregates: one key per
// (cgroup, disk, operation) that did I/O and was not yet found idle. At
// 816 bytes a key (allocated as keys appear), 32,768 keys are 25.5 MiB of
// kernel memory at most: 10,000 containers reading and writing one disk
// each, with room for the host's own cgroups.
const DefaultMaxKeys = 32768

// Options configure the sensor.
type Options struct {
	// SysRoot is sysfs ("" is /sys): the kernel's BTF is read from
	// SysRoot/kernel/btf/vmlinux.
	SysRoot string
	// ProcRoot is procfs ("" is /proc): the process's capabilities are
	// read from ProcRoot/self/status before any bpf(2) call, so that a
	// daemon without them (the systemd unit's empty capability set, whose
	// system-call filter has no bpf) makes none.
	ProcRoot string
	// MaxKeys bounds the table of aggregates; 0 is DefaultMaxKeys.
	MaxKeys int
}

// Sensor is the kernel half, loaded and attached.
type Sensor struct {
	objs  iolatObjects
	links []link.Link
	// The batches of dump, kept between reads.
	kb []rawKey
	vb []rawValue
	// bios: the bio counters, made at the first Bios.
	bios *Bios
}

// Op is a request's operation as the sensor counts it.
type Op uint8

const (
	Read  Op = 0
	Write Op = 1 // writes, discards, write-zeroes: every data-changing request
)

func (o Op) String() string {
	if o == Read {
		return "read"
	}
	return "write"
}

// Key names one aggregate.
type Key struct {
	// Cgroup is the inode number of the directory of the cgroup the
	// requests were charged to (v1 blkio or v2), 0 for requests without
	// a bio.
	Cgroup uint64
	Dev    cgroupfs.Dev // the whole disk
	Op     Op
}

// rawKey and rawValue are iolat.c's struct key and struct value.
type rawKey struct {
	Cgroup uint64
	Dev    uint32
	Op     uint32
}

type rawValue struct {
	Count, Bytes, Issued, Retired uint64
	TotalNs, QueueNs              uint64
	Hist                          [histSlots]uint32 // NumBuckets used
	Alone                         [AloneBuckets]uint32
}

// histSlots is iolat.c's HIST_SLOTS: the histogram's array, a power of two
// long for the verifier's sake.
const histSlots = 128

// AloneBuckets is iolat.c's ALONE_SLOTS: the histogram of the requests
// served alone (Delta.Alone) has the histogram's buckets up to the last,
// which holds every time from its lower bound on (50.3 ms).
const AloneBuckets = 64

func (k rawKey) key() Key {
	return Key{Cgroup: k.Cgroup, Dev: cgroupfs.Dev{Major: k.Dev >> 20, Minor: k.Dev & (1<<20 - 1)}, Op: Op(k.Op)}
}

// Open loads the programs and attaches them. Its error is an
// *UnavailableError that says why and how to fix it.
func Open(o Options) (*Sensor, error) {
	sys := o.SysRoot
	if sys == "" {
		sys = "/sys"
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.MaxKeys < 0 {
		return nil, fmt.Errorf("iolat: max keys %d: must be positive", o.MaxKeys)
	}
	if err := privileged(cmp.Or(o.ProcRoot, "/proc")); err != nil {
		return nil, err
	}
	vmlinux := filepath.Join(sys, "kernel", "btf", "vmlinux")
	kernel, err := btf.LoadSpec(vmlinux)
	if err != nil {
		return nil, unavailable(fmt.Errorf("%w: %w", errNoBTF, err))
	}
	raiseMemlock()
	spec, err := loadIolat()
	if err != nil {
		return nil, fmt.Errorf("iolat: the embedded object: %w", err)
	}
	spec.Maps["aggregates"].MaxEntries = uint32(o.MaxKeys)
	s := &Sensor{}
	err = spec.LoadAndAssign(&s.objs, &ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernel}})
	if err != nil {
		return nil, unavailable(fmt.Errorf("load: %w", err))
	}
	// Complete first: a request issued before it is attached is not
	// found at its completion and simply not counted.
	for _, p := range []*ebpf.Program{s.objs.OnComplete, s.objs.OnRequeue, s.objs.OnIssue, s.objs.OnBio} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			s.Close()
			return nil, unavailable(fmt.Errorf("attach %s: %w", p, err))
		}
		s.links = append(s.links, l)
	}
	return s, nil
}

// Close detaches the programs and frees the tables.
func (s *Sensor) Close() error {
	var errs []error
	for i := len(s.links) - 1; i >= 0; i-- {
		errs = append(errs, s.links[i].Close())
	}
	s.links = nil
	if s.bios != nil {
		s.bios.unmap()
	}
	errs = append(errs, s.objs.Close())
	return errors.Join(errs...)
}

// Drops are the requests the kernel half could not account.
type Drops struct {
	// Uncounted: a request of a new key while the table of aggregates
	// was full.
	Uncounted uint64
	// Untimed: the table of requests in flight was full.
	Untimed uint64
	// Missed: events the kernel did not run the programs for because one
	// was running on the CPU already (an interrupt completing a request
	// while a program ran: the program's recursion misses, Linux 5.12+).
	// A missed completion leaves its request counted in flight until its
	// request struct is issued again, then as retired, never as done.
	Missed uint64
}

func (s *Sensor) drops() (Drops, error) {
	var d Drops
	for i, dst := range []*uint64{&d.Uncounted, &d.Untimed} {
		var per []uint64
		if err := s.objs.Drops.Lookup(uint32(i), &per); err != nil {
			return d, fmt.Errorf("iolat: read drops: %w", err)
		}
		for _, n := range per {
			*dst += n
		}
	}
	for _, p := range []*ebpf.Program{s.objs.OnIssue, s.objs.OnRequeue, s.objs.OnComplete} {
		st, err := p.Stats()
		if err != nil {
			return d, fmt.Errorf("iolat: read %s's statistics: %w", p, err)
		}
		d.Missed += st.RecursionMisses
	}
	return d, nil
}

// dump calls fn with every aggregate of the kernel's table, in batches
// where the kernel has them (5.6), else one key at a time; 256 aggregates a
// batch (143 KiB kept): 2,000 aggregates take 8 system calls.
func (s *Sensor) dump(fn func(k rawKey, v *rawValue)) error {
	if s.kb == nil {
		s.kb, s.vb = make([]rawKey, 256), make([]rawValue, 256)
	}
	if err := eachEntry(s.objs.Aggregates, s.kb, s.vb, fn); err != nil {
		return fmt.Errorf("iolat: read aggregates: %w", err)
	}
	return nil
}

// eachEntry calls fn with every entry of map m, read in batches of len(kb)
// (kb and vb the same length, kept by the caller) where the kernel has
// them (5.6), else one key at a time; v is valid during the call only.
func eachEntry[K, V any](m *ebpf.Map, kb []K, vb []V, fn func(k K, v *V)) error {
	var cursor ebpf.MapBatchCursor
	for first := true; ; first = false {
		n, err := m.BatchLookup(&cursor, kb, vb, nil)
		if first && errors.Is(err, ebpf.ErrNotSupported) {
			break
		}
		for i := range n {
			fn(kb[i], &vb[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	var k K
	var v V
	it := m.Iterate()
	for it.Next(&k, &v) {
		fn(k, &v)
	}
	return it.Err()
}

// events is the kernel half's count of changes to the aggregates (iolat.c's
// events), read from the memory the kernel shares with the process (no
// system call); ok is false where the kernel cannot share it (before 5.5).
func (s *Sensor) events() (n uint64, ok bool) {
	if s.objs.Events == nil || s.objs.Events.Get(&n) != nil {
		return 0, false
	}
	return n, true
}

func (s *Sensor) remove(k rawKey) error {
	err := s.objs.Aggregates.Delete(k)
	if errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil
	}
	return err
}

// raiseMemlock lifts RLIMIT_MEMLOCK on kernels before 5.11, which charge
// BPF maps to it (since, they are charged to the memory cgroup). Not
// cilium/ebpf's rlimit package: its init calls bpf(2) in every process
// that links it, privileged or not (the systemd unit's filter refuses
// that call).
func raiseMemlock() {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return
	}
	if major > 5 || major == 5 && minor >= 11 {
		return
	}
	_ = unix.Setrlimit(unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: unix.RLIM_INFINITY, Max: unix.RLIM_INFINITY})
}
