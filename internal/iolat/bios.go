package iolat

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Bios are the kernel's bio counters (iolat.c's bios and bio_counts): the
// bytes of the bios submitted to a disk, per cgroup watched on it, counted
// where the cgroup byte counters count them and to the nearest watched
// ancestor (or the cgroup itself). A watched cgroup's count is its counter
// file's bytes (read and write, recursive) since it was watched, read from
// the memory the kernel shares instead of a file; a watched parent's is what its
// subtree did beyond the watched cgroups below it. The throttle's fast
// loop reads them (internal/actuate's BioCounter); every method is safe for
// concurrent use (one throttle per disk).
type Bios struct {
	m      *ebpf.Map      // iolat.c's bios: a watched key's slot
	counts *ebpf.Map      // iolat.c's bio_counts: the slots' counters
	keys   *ebpf.Variable // iolat.c's bio_keys
	// mem is bio_counts mapped into the process (nil where the kernel
	// cannot share it: each slot is then looked up with a system call).
	mem  []byte
	mu   sync.Mutex
	refs map[bioKey]bioRef
	used []bool   // by slot
	next uint32   // where the search for a free slot starts
	val  bioValue // the look-ups' scratch, under mu
}

// bioRef is a watched key: how many watch it and its slot.
type bioRef struct {
	n    int
	slot uint32
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

// bioValueSize is struct bio_value's size, and its stride in bio_counts.
const bioValueSize = 16

func keyOf(ino uint64, dev cgroupfs.Dev) bioKey {
	return bioKey{Cgroup: ino, Dev: dev.Major<<20 | dev.Minor}
}

// Bios is the sensor's bio counters (one for the sensor: it hands out
// bio_counts' slots).
func (s *Sensor) Bios() *Bios {
	if s.bios == nil {
		b := &Bios{m: s.objs.Bios, counts: s.objs.BioCounts, keys: s.objs.BioKeys, refs: map[bioKey]bioRef{},
			used: make([]bool, s.objs.BioCounts.MaxEntries())}
		size := int(s.objs.BioCounts.MaxEntries()) * bioValueSize
		if mem, err := unix.Mmap(s.objs.BioCounts.FD(), 0, size, unix.PROT_READ, unix.MAP_SHARED); err == nil {
			b.mem = mem
		}
		s.bios = b
	}
	return s.bios
}

// unmap releases the mapping of bio_counts (Sensor.Close).
func (b *Bios) unmap() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mem != nil {
		_ = unix.Munmap(b.mem)
		b.mem = nil
	}
}

// bytesAt is what slot's bios carried, under mu: an atomic load from the
// shared memory (the kernel adds with atomic instructions), or a look-up.
func (b *Bios) bytesAt(slot uint32) (uint64, error) {
	if b.mem != nil {
		return atomic.LoadUint64((*uint64)(unsafe.Pointer(&b.mem[int(slot)*bioValueSize]))), nil
	}
	if err := b.counts.Lookup(slot, &b.val); err != nil {
		return 0, err
	}
	return b.val.Bytes, nil
}

// freeSlot is a slot no key holds, under mu, searched from after the one
// handed out last, so that a slot freed is the last to be handed out
// again (a bio program that found the old key just before it was deleted
// has long finished by then); false when every slot is held.
func (b *Bios) freeSlot() (uint32, bool) {
	n := uint32(len(b.used))
	for i := range n {
		s := (b.next + i) % n
		if !b.used[s] {
			b.next = (s + 1) % n
			return s, true
		}
	}
	return 0, false
}

// Bios is the reader's sensor's bio counters; nil when the reader reads no
// kernel sensor (a test's fake table).
func (r *Reader) Bios() *Bios {
	if s, ok := r.t.(*Sensor); ok {
		return s.Bios()
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
	if r, ok := b.refs[k]; ok {
		r.n++
		b.refs[k] = r
		return nil
	}
	slot, ok := b.freeSlot()
	if !ok {
		return fmt.Errorf("iolat: watch the bios of cgroup inode %d on %s: %w", ino, dev, ErrBiosFull)
	}
	// The slot from zero first: the key counts into it from its insertion.
	if err := b.counts.Update(slot, bioValue{}, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("iolat: watch the bios of cgroup inode %d on %s: zero slot %d: %w", ino, dev, slot, err)
	}
	if err := b.m.Update(k, slot, ebpf.UpdateAny); err != nil {
		if errors.Is(err, unix.E2BIG) {
			err = ErrBiosFull
		}
		return fmt.Errorf("iolat: watch the bios of cgroup inode %d on %s: %w", ino, dev, err)
	}
	b.used[slot] = true
	b.refs[k] = bioRef{n: 1, slot: slot}
	b.setKeys()
	return nil
}

// Unwatch stops counting the bios of cgroup ino on dev.
func (b *Bios) Unwatch(ino uint64, dev cgroupfs.Dev) error {
	k := keyOf(ino, dev)
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.refs[k]
	switch {
	case !ok:
		return nil
	case r.n > 1:
		r.n--
		b.refs[k] = r
		return nil
	}
	delete(b.refs, k)
	b.setKeys()
	if err := b.m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		// The key may still count into its slot: the slot stays held.
		return fmt.Errorf("iolat: unwatch the bios of cgroup inode %d on %s: %w", ino, dev, err)
	}
	b.used[r.slot] = false // freeSlot hands it out again last
	return nil
}

// Bytes is what cgroup ino's bios on dev carried since it was watched.
func (b *Bios) Bytes(ino uint64, dev cgroupfs.Dev) (uint64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.refs[keyOf(ino, dev)]
	if !ok {
		return 0, fmt.Errorf("iolat: the bios of cgroup inode %d on %s: %w", ino, dev, ebpf.ErrKeyNotExist)
	}
	n, err := b.bytesAt(r.slot)
	if err != nil {
		return 0, fmt.Errorf("iolat: the bios of cgroup inode %d on %s: %w", ino, dev, err)
	}
	return n, nil
}

// Each calls fn with every cgroup watched on dev and what its bios carried
// since it was watched, read from the memory the kernel shares (no system
// call; where it cannot share it, one look-up a key): its cost is the
// keys watched, not the table's size (a batch look-up walked all 32,768
// buckets of a hash table: 0.4–0.8 ms at 1,000 keys, measured with bench scale).
func (b *Bios) Each(dev cgroupfs.Dev, fn func(ino, bytes uint64)) error {
	want := keyOf(0, dev).Dev
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, r := range b.refs {
		if k.Dev != want {
			continue
		}
		n, err := b.bytesAt(r.slot)
		if err != nil {
			return fmt.Errorf("iolat: read the bio counters: %w", err)
		}
		fn(k.Cgroup, n)
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
