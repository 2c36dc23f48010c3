package throttle

import (
	"errors"
	"fmt"
	"io/fs"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// BioCounter is the kernel's count of the bytes of the bios submitted to a
// disk per watched cgroup (internal/iolat's Bios, the latency sensor's
// block_bio_queue program): counted where the cgroup byte counters count
// them, each to the nearest watched one of its cgroup and that cgroup's
// ancestors. With it, a period of the throttle's fast loop reads one map
// entry per demoted workload, and one per parent for what the parent's
// subtree did beyond the demoted — a better level's I/O, exactly, with no
// counter file read and no bracketing of the demoted between two reads of
// the parents (at 1,000 demoted workloads a period of file reads was 20 ms
// of CPU at once). Counts start at zero at Watch.
type BioCounter interface {
	Watch(ino uint64, dev cgroupfs.Dev) error
	Unwatch(ino uint64, dev cgroupfs.Dev) error
	// Each calls fn with every cgroup watched on dev and its count.
	Each(dev cgroupfs.Dev, fn func(ino, bytes uint64)) error
}

// biosPerRead is how many watched cgroups count as one counter file read
// in the read budget (Config.Reads): a period reads their counters from
// the memory the kernel shares, 0.02–0.03 µs a cgroup (iolat's
// BenchmarkRealBios; a batch look-up was 0.25 µs), and then spends far more
// on each in Go (finding it, its load, its cap): ~1 µs a cgroup in a CPU
// profile of bench scale at 1,000 demoted, against a leaf file's ~10 µs.
// (Counted at 0.25 µs, the periods came every 52 ms and the fast loop took
// 21 ms of CPU a second.)
const biosPerRead = 10

// SetBios makes the throttle count its workloads' bytes with b (nil: with
// its counter files again).
func (t *Throttle) SetBios(b BioCounter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.dropBios()
	t.bio = b
	t.bioIno = map[uint64]*tmember{}
	t.setNew, t.parentsNew = true, true
}

// syncBios watches, in the kernel, the parents and the demoted members —
// those the period's other I/O is beyond — and stops watching the others.
// Run after the watch list was rebuilt. A failure other than a cgroup gone
// stops the use of the bio counters: the periods read the files again.
func (t *Throttle) syncBios() {
	if t.bio == nil {
		return
	}
	fail := func(what string, err error) {
		t.log.Warn("throttle: the kernel's bio counters cannot watch a cgroup; reading the counter files instead",
			"device", t.name, "cgroup", what, "err", err)
		t.dropBios()
		t.bio = nil
	}
	for _, p := range t.parents {
		if p.bioW {
			continue
		}
		ino, err := t.h.DirIno(p.rel)
		if err == nil {
			err = t.bio.Watch(ino, t.dev)
		}
		if err != nil {
			fail(p.rel, err)
			return
		}
		p.ino, p.bioW = ino, true
	}
	for _, m := range t.bioIno {
		if t.members[m.cgroup] != m || !t.Wants(m.level) {
			t.unwatchBio(m) // deletes it from bioIno: allowed in a range
		}
	}
	for _, m := range t.watch {
		if !t.Wants(m.level) || m.bioW {
			continue
		}
		ino, err := t.h.DirIno(m.cgroup)
		if err == nil {
			err = t.bio.Watch(ino, t.dev)
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone: the next Update drops it
		}
		if err != nil {
			fail(m.cgroup, err)
			return
		}
		// Counted from zero: its file's last value is no base.
		m.ino, m.bioW, m.lastOK, m.winOK, m.winIOsOK = ino, true, false, false, false
		t.bioIno[ino] = m
	}
}

func (t *Throttle) unwatchBio(m *tmember) {
	if m.twatch == nil || !m.bioW {
		return
	}
	if err := t.bio.Unwatch(m.ino, t.dev); err != nil {
		t.log.Debug("throttle: unwatch a cgroup's bios", "device", t.name, "cgroup", m.cgroup, "err", err)
	}
	if t.bioIno[m.ino] == m {
		delete(t.bioIno, m.ino)
	}
	m.bioW, m.lastOK, m.winOK, m.winIOsOK = false, false, false, false
}

// dropBios stops watching everything in the kernel.
func (t *Throttle) dropBios() {
	if t.bio == nil {
		return
	}
	for _, m := range t.bioIno {
		t.unwatchBio(m)
	}
	for _, p := range t.parents {
		t.unwatchParent(p)
	}
	t.baseOK = false
}

func (t *Throttle) unwatchParent(p *tparent) {
	if t.bio == nil || !p.bioW {
		return
	}
	if err := t.bio.Unwatch(p.ino, t.dev); err != nil {
		t.log.Debug("throttle: unwatch a parent's bios", "device", t.name, "cgroup", p.rel, "err", err)
	}
	p.bioW = false
}

// readBios is the bio counters' period: the parents' bytes beyond the
// demoted (other: a better level's I/O so far), and each demoted member's
// bytes (marked as readDemoted marks them); reads is what it counts in the
// read budget. err says why they could not be read, or that a parent was
// not among them.
func (t *Throttle) readBios(now time.Time) (other int64, reads int, err error) {
	n, parents := 0, 0
	err = t.bio.Each(t.dev, func(ino, bytes uint64) {
		n++
		if m := t.bioIno[ino]; m != nil {
			if m.bioW && t.Wants(m.level) {
				m.observe(now, bytes, 0)
			}
			return
		}
		for _, p := range t.parents {
			if p.bioW && p.ino == ino {
				other += int64(bytes)
				parents++
				return
			}
		}
	})
	if err == nil {
		watched := 0
		for _, p := range t.parents {
			if p.bioW {
				watched++
			}
		}
		if parents != watched {
			err = fmt.Errorf("%d of the %d parents watched not counted", watched-parents, watched)
		}
	}
	return other, (n + biosPerRead - 1) / biosPerRead, err
}
