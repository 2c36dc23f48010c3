package actuate

import (
	"fmt"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/devsensor"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// Setting is the state of one cgroup's knob on one device, as a mechanism
// reads and writes it.
type Setting struct {
	// Had and Native are a weight knob's per-device entry: whether one is
	// set, and its value on the knob's own scale.
	Had    bool
	Native uint64
	// Limits are the throttle's limits in force (zero: none).
	Limits cgroupfs.Limits
}

// Mechanism is one way of putting levels into effect on one device: a
// BFQ, iocost or CFQ weight, or the throttle. Each reads, writes and reads
// back its own knob; the Actuator around it keeps the originals and makes
// them durable before any write. Adding a mechanism (io.latency, iocost QoS
// targets) is one more implementation and one more case in newMechanism.
type Mechanism interface {
	// Kind is the host's name for the mechanism.
	Kind() host.Mechanism
	// Knob names the originals it records: "bfq", "iocost", "cfq",
	// "throttle".
	Knob() string
	// Read returns the knob's present setting for cgroup on the device.
	Read(cgroup string) (Setting, error)
	// Write puts s in force (restoring an original is writing it).
	Write(cgroup string, s Setting) error
}

// leveled is a Mechanism whose setting follows from a workload's level and
// weight alone; the Actuator writes it at each Apply.
type leveled interface {
	Mechanism
	Want(t *Target) Setting
}

// dynamic is a Mechanism that decides its settings itself, between ticks
// (the throttle's fast loop). The Actuator records and persists the
// originals of the workloads that Wants says it may write, and hands it the
// workloads at every Apply; it writes only knobs whose originals are
// durable.
type dynamic interface {
	Mechanism
	// Wants reports whether a workload at level may need the knob written
	// (so its original must be recorded first).
	Wants(level int) bool
	// Update hands over the workloads on the device after an Apply.
	Update(members []Member)
	// Forget stops managing cgroup; the Actuator restores it after.
	Forget(cgroup string)
	// InForce returns what the mechanism has in force for cgroup.
	InForce(cgroup string) (cgroupfs.Limits, error)
	// TopActive is the best level active on the device lately (0: none).
	TopActive() int
	// Capacity is the device's capacity as estimated now (bytes and
	// requests per second; 0: not measured yet).
	Capacity() (bps, iops float64)
	// ObservePeak feeds a tick's device bandwidth (bytes/s), for when the
	// device's own counters cannot be read.
	ObservePeak(bps float64)
	// Hold puts c in force from the next period of its loop (the zero
	// Ceiling lifts it).
	Hold(c Ceiling)
	// Stop ends its loop; Update starts it again.
	Stop()
	// OpenFiles is how many descriptors it keeps open now.
	OpenFiles() int
}

// Member is one workload as a dynamic mechanism sees it.
type Member struct {
	Cgroup string
	Level  int
	// Durable: the knob's original is recorded and durable, so the
	// mechanism may write the knob.
	Durable bool
}

// newMechanism returns the implementation of d's mechanism; sen is the
// device's sensor (nil: none given).
func newMechanism(cfg Config, d Device, sen *devsensor.Device) (Mechanism, error) {
	h := cfg.Hierarchy
	switch d.Mech {
	case host.MechBFQWeight:
		return &weightMech{h: h, dev: d.Dev, kind: cgroupfs.WeightBFQ, mech: d.Mech}, nil
	case host.MechIOCostWeight:
		return &weightMech{h: h, dev: d.Dev, kind: cgroupfs.WeightIOCost, mech: d.Mech}, nil
	case host.MechCFQWeight:
		return &weightMech{h: h, dev: d.Dev, kind: cgroupfs.WeightCFQ, mech: d.Mech}, nil
	case host.MechThrottle:
		return newThrottle(cfg, d, sen), nil
	}
	return nil, fmt.Errorf("device %s: no mechanism %q", d.Name, d.Mech)
}

// knobOf maps a knob name kept in originals to a mechanism that writes it
// on dev, so an original adopted from a state file can be restored before
// any workload of this run touched it.
func knobOf(h cgroupfs.Hierarchy, knob string, dev cgroupfs.Dev) (Mechanism, error) {
	switch knob {
	case "throttle":
		return limitsKnob{h: h, dev: dev}, nil
	}
	for _, k := range []cgroupfs.WeightKind{cgroupfs.WeightBFQ, cgroupfs.WeightIOCost, cgroupfs.WeightCFQ} {
		if k.String() == knob {
			return &weightMech{h: h, dev: dev, kind: k}, nil
		}
	}
	return nil, fmt.Errorf("unknown knob %q", knob)
}

// verify reads a knob back after writing s: a knob that swallows writes (a
// file bind-mounted over it, a kernel that ignores the value) must not be
// reported as in force.
func verify(m Mechanism, cgroup string, s Setting) error {
	got, err := m.Read(cgroup)
	if err != nil {
		return fmt.Errorf("read back %s of %s: %w", m.Knob(), cgroup, err)
	}
	if got != s {
		return fmt.Errorf("%s of %s did not take the value written: wrote %s, reads %s", m.Knob(), cgroup, s, got)
	}
	return nil
}

func (s Setting) String() string {
	if !s.Limits.IsZero() {
		l := s.Limits
		return fmt.Sprintf("rbps=%d wbps=%d riops=%d wiops=%d", l.RBps, l.WBps, l.RIOps, l.WIOps)
	}
	if s.Had {
		return fmt.Sprintf("%d", s.Native)
	}
	return "none"
}

// weightMech is a weight knob: v1 blkio.bfq.weight_device /
// blkio.weight_device, v2 io.bfq.weight / io.weight.
type weightMech struct {
	h    cgroupfs.Hierarchy
	dev  cgroupfs.Dev
	kind cgroupfs.WeightKind
	mech host.Mechanism
}

func (m *weightMech) Kind() host.Mechanism { return m.mech }
func (m *weightMech) Knob() string         { return m.kind.String() }

func (m *weightMech) Want(t *Target) Setting {
	return Setting{Had: true, Native: cgroupfs.NativeWeight(m.kind, t.Weight)}
}

func (m *weightMech) Read(cgroup string) (Setting, error) {
	ws, err := m.h.ReadWeights(cgroup, m.kind)
	if err != nil {
		return Setting{}, err
	}
	n, had := ws.Device(m.dev)
	return Setting{Had: had, Native: n}, nil
}

func (m *weightMech) Write(cgroup string, s Setting) error {
	if s.Had {
		return m.h.SetNativeDeviceWeight(cgroup, m.kind, m.dev, s.Native)
	}
	return m.h.ResetDeviceWeight(cgroup, m.kind, m.dev)
}

// limitsKnob reads and writes the throttle's limits of one device.
type limitsKnob struct {
	h   cgroupfs.Hierarchy
	dev cgroupfs.Dev
}

func (k limitsKnob) Kind() host.Mechanism { return host.MechThrottle }
func (k limitsKnob) Knob() string         { return "throttle" }

func (k limitsKnob) Read(cgroup string) (Setting, error) {
	l, err := k.h.ReadLimits(cgroup, k.dev)
	return Setting{Limits: l}, err
}

func (k limitsKnob) Write(cgroup string, s Setting) error {
	return k.h.SetLimits(cgroup, k.dev, s.Limits)
}
