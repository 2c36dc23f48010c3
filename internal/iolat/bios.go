package iolat

import (
	"errors"
	"fmt"
	"sync"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Bios are the kernel's bio counters (iolat.c's bios): the bytes of the
// bios submitted to a disk, per cgroup watched on it, counted where the
// cgroup byte counters count them and to the nearest watched ancestor (or
// the cgroup itself). A watched cgroup's count is its counter file's
// bytes (read and write, recursive) since it was watched, read with one
// map look-up instead of a file read; a watched parent's is what its
// subtree did beyond the watched cgroups below it. The throttle's fast
// loop reads them (internal/actuate's BioCounter); every method is safe for
// concurrent use (one throttle per disk).
type Bios struct {
	m    *ebpf.Map
	keys *ebpf.Variable // iolat.c's bio_keys
	mu   sync.Mutex
	refs map[bioKey]int
	val  bioValue // Bytes' scratch, under mu
	// Each's batches, under mu.
	kb []bioKey
	vb []bioValue
}

// bioKey and bioValue are iolat.c's struct bio_key and struct bio_value.
type bioKey struct {
	Cgroup uint64
	Dev    uint32
	Pad    uint32
}

type bioValue struct {
	Bytes, Bios uint64
}

func keyOf(ino uint64, dev cgroupfs.Dev) bioKey {
	return bioKey{Cgroup: ino, Dev: dev.Major<<20 | dev.Minor}
}

// Bios is the sensor's bio counters.
func (s *Sensor) Bios() *Bios {
	return &Bios{m: s.objs.Bios, keys: s.objs.BioKeys, refs: map[bioKey]int{}}
}

// Bios is the reader's sensor's bio counters; nil when the reader reads no
// kernel sensor (a test's fake table).
func (r *Reader) Bios() *Bios {
	if s, ok := r.t.(*Sensor); ok {
		if r.bios == nil {
			r.bios = s.Bios()
		}
		return r.bios
	}
	return nil
}

// ErrBiosFull: the kernel's table of watched cgroups is full.
var ErrBiosFull = errors.New("the kernel's table of watched cgroups is full")

// Watch starts counting the bios of cgroup ino (its directory's inode
// number) on dev, from zero; a cgroup watched twice is counted once, and
// unwatched at its second Unwatch.
func (b *Bios) Watch(ino uint64, dev cgroupfs.Dev) error {
	k := keyOf(ino, dev)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refs[k] > 0 {
		b.refs[k]++
		return nil
	}
	if err := b.m.Update(k, bioValue{}, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.E2BIG) {
			err = ErrBiosFull
		}
		return fmt.Errorf("iolat: watch the bios of cgroup inode %d on %s: %w", ino, dev, err)
	}
	b.refs[k] = 1
	b.setKeys()
	return nil
}

// Unwatch stops counting the bios of cgroup ino on dev.
func (b *Bios) Unwatch(ino uint64, dev cgroupfs.Dev) error {
	k := keyOf(ino, dev)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch n := b.refs[k]; {
	case n == 0:
		return nil
	case n > 1:
		b.refs[k] = n - 1
		return nil
	}
	delete(b.refs, k)
	b.setKeys()
	if err := b.m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return fmt.Errorf("iolat: unwatch the bios of cgroup inode %d on %s: %w", ino, dev, err)
	}
	return nil
}

// Bytes is what cgroup ino's bios on dev carried since it was watched.
func (b *Bios) Bytes(ino uint64, dev cgroupfs.Dev) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.m.Lookup(keyOf(ino, dev), &b.val); err != nil {
		return 0, fmt.Errorf("iolat: the bios of cgroup inode %d on %s: %w", ino, dev, err)
	}
	return b.val.Bytes, nil
}

// Each calls fn with every cgroup watched on dev and what its bios carried
// since it was watched: one batch look-up of the table a 256 keys (where
// the kernel has them, 5.6), so that a throttle reads its 1,000 demoted
// workloads with 4 system calls.
func (b *Bios) Each(dev cgroupfs.Dev, fn func(ino, bytes uint64)) error {
	want := keyOf(0, dev).Dev
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kb == nil {
		b.kb, b.vb = make([]bioKey, 256), make([]bioValue, 256)
	}
	err := eachEntry(b.m, b.kb, b.vb, func(k bioKey, v *bioValue) {
		if k.Dev == want {
			fn(k.Cgroup, v.Bytes)
		}
	})
	if err != nil {
		return fmt.Errorf("iolat: read the bio counters: %w", err)
	}
	return nil
}

// Watched is how many (cgroup, disk) pairs are watched.
func (b *Bios) Watched() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.refs)
}

// setKeys tells the kernel half how many keys are watched (none: a bio
// costs it nothing but the test).
func (b *Bios) setKeys() {
	if b.keys != nil {
		_ = b.keys.Set(uint64(len(b.refs)))
	}
}
