package cgroupfs

import (
	"fmt"
	"io"
)

// BlockStat is a block device's own counters, /sys/block/<dev>/stat.
type BlockStat struct {
	ReadIOs, ReadSectors   uint64
	WriteIOs, WriteSectors uint64
	InFlight               uint64
	// ReadTicksMs is the reads' times summed, from allocation to
	// completion, ms.
	ReadTicksMs uint64
	IOTicksMs   uint64 // time the device had I/O in flight, ms
	// TimeInQueueMs is the in-flight requests integrated over time, ms
	// (its growth per ms is the mean queue depth).
	TimeInQueueMs uint64
}

// Bytes is read+write bytes (sectors are 512 bytes whatever the device's
// block size).
func (s BlockStat) Bytes() uint64 { return (s.ReadSectors + s.WriteSectors) * 512 }

// IOs is read+write requests completed.
func (s BlockStat) IOs() uint64 { return s.ReadIOs + s.WriteIOs }

// ParseBlockStat parses /sys/block/<dev>/stat (Documentation/block/stat.rst):
// one line of 11 (before 4.18), 15 (before 5.5) or 17 decimal fields,
//
//	read_ios read_merges read_sectors read_ticks write_ios write_merges
//	write_sectors write_ticks in_flight io_ticks time_in_queue
//	[discard_ios discard_merges discard_sectors discard_ticks
//	[flush_ios flush_ticks]]
//
// Fields past the eleventh are not used; fewer than eleven is an error.
func ParseBlockStat(data []byte) (BlockStat, error) {
	var f [11]uint64
	n := 0
	for i := 0; i < len(data) && n < len(f); {
		for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n') {
			i++
		}
		if i >= len(data) {
			break
		}
		start := i
		var v uint64
		for i < len(data) && data[i] >= '0' && data[i] <= '9' {
			d := uint64(data[i] - '0')
			if v > (^uint64(0)-d)/10 {
				return BlockStat{}, fmt.Errorf("block stat field %d: %w", n+1, errOverflow)
			}
			v = v*10 + d
			i++
		}
		if i == start || (i < len(data) && data[i] != ' ' && data[i] != '\t' && data[i] != '\n') {
			return BlockStat{}, fmt.Errorf("block stat field %d: not a number in %q", n+1, clip(data))
		}
		f[n] = v
		n++
	}
	if n < len(f) {
		return BlockStat{}, fmt.Errorf("block stat: %d fields, want at least 11 in %q", n, clip(data))
	}
	return BlockStat{ReadIOs: f[0], ReadSectors: f[2], ReadTicksMs: f[3], WriteIOs: f[4], WriteSectors: f[6],
		InFlight: f[8], IOTicksMs: f[9], TimeInQueueMs: f[10]}, nil
}

var errOverflow = fmt.Errorf("value out of range")

func clip(b []byte) string {
	if len(b) > 200 {
		b = b[:200]
	}
	return string(b)
}

// BlockStatFile is a device's stat file kept open (KeptFile), read with
// one pread(2) per reading (a sysfs attribute is generated whole at each
// read from offset 0): the throttle's fast loop reads it at every step.
type BlockStatFile struct{ f *KeptFile }

// OpenBlockStat opens path (normally /sys/block/<dev>/stat) for repeated
// reads.
func OpenBlockStat(path string) (*BlockStatFile, error) {
	f, err := OpenKept(path)
	if err != nil {
		return nil, err
	}
	return &BlockStatFile{f}, nil
}

// Read reads and parses the file again.
func (b *BlockStatFile) Read() (BlockStat, error) {
	data, err := b.f.Read()
	if err != nil {
		return BlockStat{}, err
	}
	if len(data) == 0 {
		return BlockStat{}, fmt.Errorf("read %s: %w", b.f.Path(), io.EOF)
	}
	s, err := ParseBlockStat(data)
	if err != nil {
		return s, fmt.Errorf("%s: %w", b.f.Path(), err)
	}
	return s, nil
}

// Close releases the descriptor.
func (b *BlockStatFile) Close() error { return b.f.Close() }
