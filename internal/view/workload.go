package view

// The cells of one workload, shared by status and top.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// level is a workload's LEVEL cell.
func level(w *snapshot.Workload) string {
	var s string
	switch {
	case w.Exempt:
		s = "exempt"
	case w.Pinned:
		s = strconv.Itoa(w.Level) + " pinned"
	default:
		s = strconv.Itoa(w.Level)
	}
	if w.LabelError != "" {
		s += " !label"
	}
	return s
}

// throttleOnly: every disk of w takes only limits, no weights.
func throttleOnly(w *snapshot.Workload) bool {
	for _, a := range w.Applied {
		if a.Mechanism != "throttle" {
			return false
		}
	}
	return len(w.Applied) > 0
}

// weight is the weight, or for a workload every disk of which takes only
// limits, the limit in force.
func weight(w *snapshot.Workload) string {
	if w.Exempt {
		return "-"
	}
	if !throttleOnly(w) {
		return strconv.Itoa(w.Weight)
	}
	var limits []string
	for _, a := range w.Applied {
		l := limit(a)
		if l == "" {
			l = "unlimited"
		}
		if !slices.Contains(limits, l) {
			limits = append(limits, l)
		}
	}
	if len(limits) > 1 {
		return "mixed (--json)"
	}
	return limits[0]
}

// limit is the throttle limit in force on one device, "" when none:
// 10MiB/s (read and write alike), r10MiB/s, w5MiB/s or r10MiB/s,w5MiB/s.
func limit(a snapshot.Applied) string {
	if !a.Throttled || (a.ReadBps == 0 && a.WriteBps == 0) {
		return ""
	}
	switch {
	case a.ReadBps == a.WriteBps:
		return Bytes(a.ReadBps) + "/s"
	case a.WriteBps == 0:
		return "r" + Bytes(a.ReadBps) + "/s"
	case a.ReadBps == 0:
		return "w" + Bytes(a.WriteBps) + "/s"
	default:
		return "r" + Bytes(a.ReadBps) + "/s,w" + Bytes(a.WriteBps) + "/s"
	}
}

// inLevel is the bytes moved in the level over its allowance.
func inLevel(w *snapshot.Workload) string {
	if w.Exempt {
		return "-"
	}
	allow := "-"
	if w.Allowance > 0 {
		allow = Bytes(w.Allowance)
	}
	return Bytes(w.BytesInLevel) + "/" + allow
}

// pressure is the PSI "some" avg10 of a workload, "-" without PSI.
func pressure(p *snapshot.Pressure) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(p.SomeAvg10, 'f', 1, 64) + "%"
}

// mechanisms is "dev:mechanism" per disk, with the limit in force on a
// throttled disk when the WEIGHT column shows a weight; past three disks,
// the mechanisms with their disk counts.
func mechanisms(applied []snapshot.Applied, weightShown bool) string {
	if len(applied) == 0 {
		return "-"
	}
	as := slices.Clone(applied)
	slices.SortFunc(as, func(a, b snapshot.Applied) int { return strings.Compare(a.Device, b.Device) })
	mark := func(a snapshot.Applied) string {
		if a.Error != "" {
			return "!"
		}
		return ""
	}
	var parts []string
	if len(as) <= 3 {
		for _, a := range as {
			p := Cell(a.Device) + ":" + Cell(a.Mechanism)
			if l := limit(a); l != "" && weightShown {
				p += "(" + l + ")"
			}
			parts = append(parts, p+mark(a))
		}
		return strings.Join(parts, " ")
	}
	type group struct {
		mech      string
		n         int
		anyFailed bool
	}
	var groups []group
	for _, a := range as {
		i := slices.IndexFunc(groups, func(g group) bool { return g.mech == a.Mechanism })
		if i < 0 {
			groups = append(groups, group{mech: a.Mechanism})
			i = len(groups) - 1
		}
		groups[i].n++
		groups[i].anyFailed = groups[i].anyFailed || a.Error != ""
	}
	slices.SortFunc(groups, func(a, b group) int { return strings.Compare(a.mech, b.mech) })
	for _, g := range groups {
		p := fmt.Sprintf("%s(%d)", Cell(g.mech), g.n)
		if g.anyFailed {
			p += "!"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}
