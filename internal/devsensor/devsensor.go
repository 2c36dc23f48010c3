// Package devsensor is the one owner of a block device's own counters
// (sysfs class/block/<dev>/stat): one descriptor per device, read at most
// once per fast period by whichever consumer asks first, the same reading
// handed to every consumer — the throttle's capacity estimate and the
// storage-health tracker alike.
//
// Beside the kernel's counters a Device keeps the daemon's own: what the
// caps the daemon imposed on the device allowed, and for how long a
// workload was held back by one (Caps). A consumer judging the device from
// two readings sees both over the same window, so a rate the daemon
// imposed is never mistaken for the device's.
package devsensor

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// DefaultMinGap is how old a reading may be and still be handed out
// instead of reading the file again: the throttle's fast period.
const DefaultMinGap = 10 * time.Millisecond

// Caps are cumulative counters of what the daemon's caps did on a device,
// like the kernel's own: a consumer takes the difference of two readings.
type Caps struct {
	// CappedSecs: time during which at least one workload that did I/O
	// had a cap in force.
	CappedSecs float64
	// HeldSecs: time during which at least one workload ran at its cap
	// (held back by it: its demand was more than the cap let through).
	HeldSecs float64
	// Bytes and IOs are the caps in force integrated over time: what the
	// capped workloads together were allowed (bytes/s caps × seconds,
	// IOPS caps × seconds).
	Bytes, IOs float64
}

// Sub is c minus an earlier prev.
func (c Caps) Sub(prev Caps) Caps {
	return Caps{CappedSecs: c.CappedSecs - prev.CappedSecs, HeldSecs: c.HeldSecs - prev.HeldSecs,
		Bytes: c.Bytes - prev.Bytes, IOs: c.IOs - prev.IOs}
}

// Add is c plus d.
func (c Caps) Add(d Caps) Caps {
	return Caps{CappedSecs: c.CappedSecs + d.CappedSecs, HeldSecs: c.HeldSecs + d.HeldSecs,
		Bytes: c.Bytes + d.Bytes, IOs: c.IOs + d.IOs}
}

// Reading is a device's counters at one moment.
type Reading struct {
	At   time.Time
	Stat cgroupfs.BlockStat
	Caps Caps // the daemon's caps so far
}

// Device is one block device's counters. Safe for concurrent use: the
// throttle's fast loop and the daemon's tick read it from their own
// goroutines.
type Device struct {
	name, path string
	minGap     time.Duration

	mu     sync.Mutex
	f      *cgroupfs.BlockStatFile
	last   Reading
	have   bool
	caps   Caps
	closed bool
}

// Open opens device name's counters under sysfs root sysRoot
// (sysRoot/class/block/<name>/stat: a disk's or a partition's). minGap is
// how old a reading may be and still be handed out again; 0 means
// DefaultMinGap.
func Open(sysRoot, name string, minGap time.Duration) (*Device, error) {
	if sysRoot == "" || name == "" || filepath.Base(name) != name {
		return nil, fmt.Errorf("device sensor: sysfs root %q, device %q: both required, the device a plain name", sysRoot, name)
	}
	if minGap <= 0 {
		minGap = DefaultMinGap
	}
	p := filepath.Join(sysRoot, "class", "block", name, "stat")
	f, err := cgroupfs.OpenBlockStat(p)
	if err != nil {
		return nil, fmt.Errorf("device sensor %s: %w", name, err)
	}
	return &Device{name: name, path: p, minGap: minGap, f: f}, nil
}

// Name is the device's name.
func (d *Device) Name() string { return d.name }

// Path is the stat file read.
func (d *Device) Path() string { return d.path }

var errClosed = errors.New("device sensor closed")

// Read returns the device's counters at now: the last reading when it is
// younger than the minimum gap (another consumer read the file this
// period), else a new read of the file. The reading's At says when it was
// taken. The caps are those added so far either way.
func (d *Device) Read(now time.Time) (Reading, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return Reading{}, fmt.Errorf("device sensor %s: %w", d.name, errClosed)
	}
	if age := now.Sub(d.last.At); d.have && age >= 0 && age < d.minGap {
		r := d.last
		r.Caps = d.caps
		return r, nil
	}
	s, err := d.f.Read()
	if err != nil {
		return Reading{}, err
	}
	d.last, d.have = Reading{At: now, Stat: s, Caps: d.caps}, true
	return d.last, nil
}

// AddCaps adds what the daemon's caps did on the device since the last
// call (the throttle calls it every period).
func (d *Device) AddCaps(c Caps) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.caps = d.caps.Add(c)
}

// Close releases the descriptor; later Reads fail. Closing twice is a
// no-op.
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	return d.f.Close()
}

// Set is the sensors of a list of devices, indexed like it; a nil entry:
// none for that device.
type Set []*Device

// OpenSet opens the sensor of each device of names under sysRoot (Open,
// with minGap); a device whose counters cannot be opened gets a nil
// entry, and failed is called with its name and the error.
func OpenSet(sysRoot string, names []string, minGap time.Duration, failed func(name string, err error)) Set {
	s := make(Set, len(names))
	for i, name := range names {
		sen, err := Open(sysRoot, name, minGap)
		if err != nil {
			failed(name, err)
			continue
		}
		s[i] = sen
	}
	return s
}

// Named is the sensor of the device named name, nil if none.
func (s Set) Named(name string) *Device {
	for _, d := range s {
		if d != nil && d.name == name {
			return d
		}
	}
	return nil
}

// Close closes every sensor of s.
func (s Set) Close() {
	for _, d := range s {
		if d != nil {
			d.Close()
		}
	}
}
