package view

// The cells of one workload, shared by status and top.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

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

// action is what ddiskqos does to a workload on one device: "cap
// 64MiB/s" (a throttle limit in force now, as limit shows it), "weight
// 500" (its share of the disk), or "no cap" (the throttle, nothing in
// force now), then the per-level mechanisms with a value in force
// ("weight 100+level-limit"); "!" marks a failure to apply (the notes
// say which).
func action(a snapshot.Applied) string {
	var s string
	switch l := limit(a); {
	case l != "":
		s = "cap " + l
	case a.Weight > 0:
		s = "weight " + strconv.Itoa(a.Weight)
	default:
		s = "no cap"
	}
	if a.Knobs != "" {
		s += "+" + knobNames(a.Knobs)
	}
	if a.Error != "" {
		s += "!"
	}
	return s
}

// actions is the ACTION cell: what ddiskqos does to w on the disks w used
// (its own counters show I/O there), not on disks it never touched: one
// disk named ("sda cap 64MiB/s"), two listed, more counted when the
// action is the same on each ("weight 500 on 3 disks"); "-" for an
// exempt workload or one with nothing applied, "no I/O yet" when it used
// none of the disks.
func actions(w *snapshot.Workload) string {
	if w.Exempt || len(w.Applied) == 0 {
		return "-"
	}
	var used []snapshot.Applied
	for _, a := range w.Applied {
		if a.Used {
			used = append(used, a)
		}
	}
	slices.SortFunc(used, func(a, b snapshot.Applied) int { return strings.Compare(a.Device, b.Device) })
	switch {
	case len(used) == 0:
		return "no I/O yet"
	case len(used) <= 2:
		parts := make([]string, len(used))
		for i, a := range used {
			parts[i] = Cell(a.Device) + " " + action(a)
		}
		return strings.Join(parts, ", ")
	}
	first := action(used[0])
	for _, a := range used[1:] {
		if action(a) != first {
			return fmt.Sprintf("mixed on %d disks (--json)", len(used))
		}
	}
	return fmt.Sprintf("%s on %d disks", first, len(used))
}

// knobNames names the mechanisms of a snapshot's Applied.Knobs, joined
// by "+" ("level-limit"); their values are in status's notes and --json.
func knobNames(text string) string {
	var names []string
	for kv := range strings.SplitSeq(text, "; ") {
		name, _, _ := strings.Cut(kv, "=")
		names = append(names, name)
	}
	return Cell(strings.Join(names, "+"))
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

// mechanisms is "dev:mechanism" per disk (what ACTION shows is done
// through them); past three disks, the mechanisms with their disk counts.
func mechanisms(applied []snapshot.Applied) string {
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
			parts = append(parts, Cell(a.Device)+":"+Cell(a.Mechanism)+mark(a))
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

// p99 is a workload's P99 cell: the worst p99 of its last tick's requests
// over its disks and directions (the eBPF sensor), "idle" when none
// completed, "-" without a latency record (no sensor, or no I/O yet).
func p99(w *snapshot.Workload) string {
	p, _, ok := w.LatencySummary()
	switch {
	case !ok:
		return "-"
	case p == 0:
		return "idle"
	}
	return latencyText(p)
}

// inFlight is a workload's IN-FLIGHT cell: its requests issued and not
// completed on all its disks at the last tick, "-" without a latency record.
func inFlight(w *snapshot.Workload) string {
	_, n, ok := w.LatencySummary()
	if !ok {
		return "-"
	}
	return strconv.FormatUint(n, 10)
}

// latencyText is seconds as a short duration, two significant digits
// below 10 of a unit: 853µs, 1.2ms, 35ms, 2.1s.
func latencyText(sec float64) string {
	d := time.Duration(sec * 1e9)
	for _, unit := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= unit {
			if d < 10*unit {
				return d.Round(unit / 10).String()
			}
			return d.Round(unit).String()
		}
	}
	return d.String()
}
