package mech

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Offer says whether the kernel offers a mechanism's cgroup files, and how
// that was found out (internal/host probes it; Known is false when nothing
// could tell).
type Offer struct {
	File    string
	Present bool
	Known   bool
	How     string
}

// usable: offered, or nothing could tell (the files are then tried).
func (o Offer) usable() bool { return o.Present || !o.Known }

// Verdict is a Probe's answer for one device.
type Verdict struct {
	OK bool
	// Reason says why the mechanism works on the device, or why not.
	Reason string
	// Verified says how its files were found to exist.
	Verified string

	// A refusal's rank: how much it tells of why the device has no
	// weight. RankSpecific beats RankDevice beats RankOff.
	Rank Rank
	// Fix is the command that would make it work here ("": none known);
	// FixAs names it in a reason ("enable iocost"; "": the bare command).
	Fix, FixAs string
	// Note is a remark for the reason when another mechanism's fix is
	// offered ("iocost would need cgroup v2 as the I/O hierarchy").
	Note string
}

// Rank orders refusals: the highest-ranked says why, and its fix comes
// first.
type Rank uint8

const (
	// RankOff: the mechanism is merely not turned on for the device.
	RankOff Rank = iota
	// RankDevice: the device itself rules it out (its scheduler, or none).
	RankDevice
	// RankSpecific: the device would take it, the kernel lacks its files.
	RankSpecific
)

// WeightRange is the range the kernel accepts in a weight file.
type WeightRange struct {
	Min     int `json:"min"`
	Max     int `json:"max"`
	Default int `json:"default"`
}

// Choice is the mechanism chosen for one device, and what the actuator
// needs to use it.
type Choice struct {
	Mechanism        Name
	WeightsEffective bool
	// WeightFile takes "N" (v1) or "default N" (v2); WeightDeviceFile takes
	// "MAJ:MIN N". They are the same file on v2.
	WeightFile       string
	WeightDeviceFile string
	Weight           *WeightRange
	// Verified says how the mechanism's files were found to exist.
	Verified string
	Reason   string
	// Fix is the command that gets weights on the device ("" when they
	// work, or when nothing can be done on this device).
	Fix string
	// Also are the mechanisms in force beside Mechanism, in table order;
	// NotBeside those the configuration turns on that cannot run on the
	// device, each with why.
	Also      []Name
	NotBeside []Refusal
}

// Refusal is a mechanism the configuration turns on that cannot run on a
// device, and why.
type Refusal struct {
	Mechanism Name   `json:"mechanism"`
	Reason    string `json:"reason"`
}

// Choose is the one chooser of a device's mechanisms, for check and for
// the daemon alike: its main one (chooseMain) and, where it has one, each
// mechanism the configuration p runs beside it (Beside) that can work
// there. A Target's Probe decides where it runs, looking at the main one
// and those chosen before it (Env.Mechs); the throttle beside a weight runs
// wherever the configuration says.
func Choose(e Env, p Params) Choice {
	c := chooseMain(e)
	if c.Mechanism == None {
		return c
	}
	e.Mechs = []Name{c.Mechanism}
	for _, m := range table {
		if m.Beside == nil || m.Name == c.Mechanism || !m.Beside(c.Mechanism, p) {
			continue
		}
		if m.Role == Target {
			if v := m.Probe(e); !v.OK {
				c.NotBeside = append(c.NotBeside, Refusal{Mechanism: m.Name, Reason: v.Reason})
				continue
			}
		}
		c.Also = append(c.Also, m.Name)
		e.Mechs = append(e.Mechs, m.Name)
	}
	return c
}

// chooseMain picks a device's main mechanism: the first weight of the table
// (its order is the preference) whose Probe accepts the device, else the
// throttle's caps where offered, else None. Without a weight, the reason
// is the most telling weight's refusal, what the caps do, and the fixes
// that would get weights.
func chooseMain(e Env) Choice {
	if e.H.Version == 0 {
		return Choice{Mechanism: None,
			Reason: "no I/O cgroup hierarchy: neither v1 blkio nor cgroup2 is mounted",
			Fix:    "mount -t cgroup -o blkio blkio /sys/fs/cgroup/blkio",
		}
	}
	if !e.Enabled {
		return Choice{Mechanism: None,
			Reason: fmt.Sprintf("the cgroup v2 hierarchy at %s has no io controller (it is bound to a v1 hierarchy or not built): no cgroup can shape I/O on %s", e.H.Mount, e.Name),
			Fix:    "mount the blkio controller (cgroup v1) or boot with systemd.unified_cgroup_hierarchy=1 so io is on cgroup v2",
		}
	}
	var refused []Verdict
	for _, m := range table {
		if m.Role != Weight || m.Probe == nil {
			continue // Docker's weight: the Docker actuator's, not a device's
		}
		v := m.Probe(e)
		if !v.OK {
			refused = append(refused, v)
			continue
		}
		file, devFile := m.WeightFiles(e.H.Version)
		r := m.Range
		return Choice{Mechanism: m.Name, WeightsEffective: true,
			WeightFile: file, WeightDeviceFile: devFile, Weight: &r,
			Verified: v.Verified, Reason: v.Reason}
	}
	slices.SortStableFunc(refused, func(a, b Verdict) int { return cmp.Compare(b.Rank, a.Rank) })
	why := ""
	if len(refused) > 0 {
		why = refused[0].Reason
	}
	c := Choice{Mechanism: None}
	for _, m := range table {
		if m.Role != Caps || m.Probe == nil {
			continue
		}
		v := m.Probe(e)
		c.Verified = v.Verified
		if v.OK {
			c.Mechanism, c.Reason = m.Name, why+"; "+v.Reason
			break
		}
		c.Reason = why + ", and " + v.Reason
	}
	var fixes, notes []string
	for _, v := range refused {
		if v.Fix == "" {
			if v.Note != "" {
				notes = append(notes, " ("+v.Note+")")
			}
			continue
		}
		if c.Fix == "" {
			c.Fix = v.Fix
		}
		if v.FixAs != "" {
			fixes = append(fixes, v.FixAs+": "+v.Fix)
		} else {
			fixes = append(fixes, v.Fix)
		}
	}
	if len(fixes) > 0 {
		sep := "; to get weights: "
		if firstFix(refused).FixAs != "" {
			sep = "; to get weights, "
		}
		c.Reason += sep + strings.Join(fixes, ", or ") + strings.Join(notes, "")
	}
	return c
}

func firstFix(vs []Verdict) Verdict {
	for _, v := range vs {
		if v.Fix != "" {
			return v
		}
	}
	return Verdict{}
}
