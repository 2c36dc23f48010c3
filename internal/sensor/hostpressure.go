package sensor

import (
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// HostPressure is the host's I/O pressure file (/proc/pressure/io), kept
// open between reads. The zero HostPressure with Path set is ready.
type HostPressure struct {
	Path string

	f *cgroupfs.HostPressureFile
	// failed: the file could not be opened, so it is not tried again
	// (PSI does not come on while the host runs).
	failed bool
}

// Read is the host's I/O pressure now; nil when the file cannot be read
// (PSI off).
func (h *HostPressure) Read() *snapshot.Pressure {
	if h.f == nil {
		if h.failed {
			return nil
		}
		f, err := cgroupfs.OpenHostPressure(h.Path)
		if err != nil {
			h.failed = true
			return nil
		}
		h.f = f
	}
	p, err := h.f.Read()
	if err != nil {
		return nil
	}
	return PressureOf(p)
}

// Close closes the file.
func (h *HostPressure) Close() {
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
}
