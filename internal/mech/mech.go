// Package mech is the registry of the mechanisms that put a workload's
// level into effect on one block device: one file per mechanism, each
// naming itself, owning its cgroup files, saying whether it can work on a
// device and why, and reading, writing and restoring its own knob. The
// actuator (internal/actuate) drives them through this table alone; the
// rest of the tree uses their names and roles from here.
//
// A knob's value crosses every seam as text (containerd/cgroups keeps its
// values the same way): the value a mechanism reads is what it writes back
// to restore it, kept verbatim in the state file and shown as is. "" is
// "nothing of ours set": no per-device weight, no limit, no target.
//
// Adding a mechanism is one file here (its Mech, its knob, its probe), one
// entry in table — whose order is the order of preference Choose walks to
// pick a device's weight or caps —, its test, and — when it takes a
// parameter — one field of Params and the config key that sets it (wiring
// passes Params in, and Choose runs a mechanism of Role Target wherever
// Beside and Probe let it). A Probe reads the host's facts (Env; internal/host
// gathers them) and says whether it can work, why (not), and the fix.
package mech

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Name names a mechanism: the one vocabulary of the tree (host's choice,
// the actuator, the snapshot, the renderers).
type Name string

// None means no cgroup mechanism reaches the device.
const None Name = "none"

// Role is how the actuator drives a mechanism.
type Role uint8

const (
	// Weight: a share of the device, written from a workload's weight at
	// each Apply (Leveled).
	Weight Role = iota + 1
	// Caps: limits the throttle's own loop decides between ticks.
	Caps
	// Target: a per-level setting written at each Apply (Leveled), beside
	// the device's weight or caps.
	Target
)

// Mech is one entry of the registry.
type Mech struct {
	Name Name
	// Knob names its originals in the state file ("bfq", "throttle"):
	// kept apart from Name, as files already written use them.
	Knob string
	Role Role
	// Files are the cgroup files it writes, by hierarchy version (for
	// check and the docs); none: it writes no cgroup file (Docker's API).
	Files func(version int) []string
	// Open returns its knob for dev in h; an error says why it has none
	// there (a v1-only knob on v2). nil: it writes no cgroup file.
	Open func(h cgroupfs.Hierarchy, dev cgroupfs.Dev, p Params) (Knob, error)
	// Probe says whether it can work on a device, and why (not); nil: it
	// is no device's mechanism (Docker's weight, chosen by the actuator).
	// Choose walks the probes of the weights and the caps in table order.
	Probe func(e Env) Verdict
	// Range and WeightFiles are a weight's (Role Weight): the values its
	// file takes, and its files on hierarchy version v (file takes "N" or
	// "default N", devFile "MAJ:MIN N"; the same file on v2).
	Range       WeightRange
	WeightFiles func(v int) (file, devFile string)
	// Scale converts a weight (10..1000, Docker's scale) to the file's
	// own (a weight's, Role Weight).
	Scale func(w cgroupfs.Weight) uint64
	// Needs is the file whose presence shows the kernel offers it, on each
	// hierarchy version: the host's probe (internal/host) looks for it and
	// hands what it found to Probe (Env.Offered). nil: nothing to find.
	Needs *Needs
	// Beside says whether the configuration p runs it beside main, a
	// device's main mechanism (Choose; a Target where its Probe lets it).
	// nil: never beside another.
	Beside func(main Name, p Params) bool
}

// Needs says how the host finds out whether the kernel offers a
// mechanism, on cgroup v1 and on v2.
type Needs struct{ V1, V2 Need }

// Need is what shows a mechanism offered on one hierarchy version.
type Need struct {
	// File is its cgroup file, looked for at the root, then in child
	// cgroups ("": it has none on this version; Absent says why).
	File string
	// Markers are files at the root that show File offered where it
	// exists only in child cgroups (and none exists yet).
	Markers []string
	// RootOnly: File exists at the root or not at all; Absent says what
	// its absence means.
	RootOnly bool
	Absent   string
}

// On is what shows the mechanism offered on hierarchy version v.
func (n Needs) On(v int) Need {
	if v == 1 {
		return n.V1
	}
	return n.V2
}

// Knob is a mechanism's knob of one device: a cgroup's value on it, as
// text.
type Knob interface {
	// Read returns the cgroup's value on the device ("": none set).
	Read(cgroup string) (string, error)
	// Write puts v in force; restoring an original is writing it.
	Write(cgroup, v string) error
}

// Leveled is a knob whose value follows from a workload's level and
// weight (Roles Weight and Target).
type Leveled interface {
	Knob
	Want(level int, w cgroupfs.Weight) string
}

// Params are the mechanisms' parameters, from the configuration.
type Params struct {
	// LevelLimits are LevelLimit's caps in bytes/s, by level-1 (0: none;
	// none at all turns the mechanism off; config key level_limits).
	LevelLimits []uint64
	// ThrottleWithWeights runs the throttle beside a scheduler's weight
	// (config key throttle_with_weights).
	ThrottleWithWeights bool
}

// Env is what a Probe looks at: the hierarchy and what its kernel offers,
// the device, and the mechanisms already chosen for it. It holds facts
// only (internal/host reads them); a Probe reads no file of its own.
type Env struct {
	H cgroupfs.Hierarchy
	// Enabled is false on cgroup v2 when the root lacks the io controller.
	Enabled bool
	// Offered is what the kernel offers of each mechanism's files (for
	// iocost: the root's io.cost.qos).
	Offered   map[Name]Offer
	Dev       cgroupfs.Dev
	Name      string // e.g. vda
	Kind      string // e.g. dm, loop
	Scheduler string // the active one; "": none (bio-based)
	// Schedulers are those the device offers; Slaves the disks under a
	// stacked device.
	Schedulers, Slaves []string
	// IOCostOn: io.cost.qos has enable=1 for the device (v2).
	IOCostOn bool
	// NoBFQ: the kernel is built without the bfq scheduler, neither in
	// nor as a module (host.BuiltWithoutBFQ): no fix can offer it.
	NoBFQ bool
	Mechs []Name
}

// table is the registry. Its order is the order of preference for a
// device's main mechanism (Choose): the weights first, iocost ahead of
// bfq (work-conserving, cheap per request, it models the device's cost;
// with both on a share would be weighted twice), then the throttle's
// caps; extras (Role Target) after.
var table = [...]*Mech{&iocost, &bfq, &cfq, &throttle, &dockerWeight, &levelLimit}

// All returns every mechanism, in table order.
func All() []*Mech { return table[:] }

// Lookup returns the mechanism named n.
func Lookup(n Name) (*Mech, error) {
	for _, m := range table {
		if m.Name == n {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no mechanism %q", n)
}

// Read returns mechanism n's value of cgroup on dev in h as its knob
// reads it ("": none set), with default parameters: a tool or a test
// reading a knob without an actuator.
func Read(h cgroupfs.Hierarchy, n Name, dev cgroupfs.Dev, cgroup string) (string, error) {
	k, err := open(h, n, dev)
	if err != nil {
		return "", err
	}
	return k.Read(cgroup)
}

// Write puts v in force as mechanism n's value of cgroup on dev in h ("":
// its own setting removed), with default parameters.
func Write(h cgroupfs.Hierarchy, n Name, dev cgroupfs.Dev, cgroup, v string) error {
	k, err := open(h, n, dev)
	if err != nil {
		return err
	}
	return k.Write(cgroup, v)
}

func open(h cgroupfs.Hierarchy, n Name, dev cgroupfs.Dev) (Knob, error) {
	m, err := Lookup(n)
	if err != nil {
		return nil, err
	}
	if m.Open == nil {
		return nil, fmt.Errorf("%s writes no cgroup file", n)
	}
	return m.Open(h, dev, Params{})
}

// WeightValue is the value the weight mechanism n writes for the weight w
// (10..1000), on its file's own scale: "300" for bfq's 300, "30" for
// iocost's.
func WeightValue(n Name, w cgroupfs.Weight) (string, error) {
	m, err := Lookup(n)
	if err != nil {
		return "", err
	}
	if m.Role != Weight || m.Scale == nil {
		return "", fmt.Errorf("%s is not a weight", n)
	}
	return strconv.FormatUint(m.Scale(w), 10), nil
}

// ByKnob returns the mechanism whose originals are named knob (a state
// file's entry).
func ByKnob(knob string) (*Mech, error) {
	for _, m := range table {
		if m.Knob == knob {
			return m, nil
		}
	}
	return nil, fmt.Errorf("unknown knob %q", knob)
}

// IsWeight reports whether n is a weight (a share of the device).
func IsWeight(n Name) bool {
	m, err := Lookup(n)
	return err == nil && m.Role == Weight
}

// IsCaps reports whether n caps (limits) workloads.
func IsCaps(n Name) bool {
	m, err := Lookup(n)
	return err == nil && m.Role == Caps
}

// Verify reads k back after v was written: a knob that swallows writes (a
// file bind-mounted over it, a kernel that ignores the value) must not be
// reported as in force.
func Verify(k Knob, knob, cgroup, v string) error {
	got, err := k.Read(cgroup)
	if err != nil {
		return fmt.Errorf("read back %s of %s: %w", knob, cgroup, err)
	}
	if got != v {
		return fmt.Errorf("%s of %s did not take the value written: wrote %s, reads %s", knob, cgroup, Show(v), Show(got))
	}
	return nil
}

// Show is a value for a message: "none" for "".
func Show(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// InCgroup reports whether m writes cgroup files, so its originals are
// keyed by cgroup (Docker's weight keys them by container id).
func (m *Mech) InCgroup() bool { return m.Open != nil }

// Join names the mechanisms in force on one device as the snapshot shows
// them: "bfq-weight+throttle".
func Join(ns []Name) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = string(n)
	}
	return strings.Join(s, "+")
}

// HasWeight reports whether a device's mechanisms as Join names them
// include a weight (a snapshot's Mechanism).
func HasWeight(joined string) bool { return hasRole(joined, Weight) }

// HasCaps reports whether they include the throttle's caps.
func HasCaps(joined string) bool { return hasRole(joined, Caps) }

func hasRole(joined string, r Role) bool {
	for n := range strings.SplitSeq(joined, "+") {
		if m, err := Lookup(Name(n)); err == nil && m.Role == r {
			return true
		}
	}
	return false
}
