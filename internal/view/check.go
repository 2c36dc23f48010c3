package view

// The text report of `ddiskqos check`.

import (
	"fmt"
	"io"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/host"
)

// CheckWidth is the column the text report of check wraps at.
const CheckWidth = 100

// Check writes the text report of `ddiskqos check`: the verdict, then the
// findings in the order of host.TriageChecks: what stops or weakens QoS, the limits of a host of
// 10,000 containers (the fine ones summarised in the heading), what some
// containers need; then the devices and what is fine. Why and fix only
// for the findings that are not ok; every line within CheckWidth columns.
func Check(w io.Writer, r host.Report) {
	counts := map[host.Status]int{}
	for _, c := range r.Checks {
		counts[c.Status]++
	}
	verdict := "QoS can work"
	if !r.QoSPossible {
		verdict = "QoS cannot work"
	}
	fmt.Fprintf(w, "ddiskqos check: %s (%d fail, %d warn, %d info, %d ok)\n", verdict, counts[host.StatusFail], counts[host.StatusWarn], counts[host.StatusInfo], counts[host.StatusOK])
	if r.Cgroup.IOHierarchy != nil {
		fmt.Fprintf(w, "cgroup %s; I/O through v%d at %s\n", r.Cgroup.Mode, r.Cgroup.IOHierarchy.Version, r.Cgroup.IOHierarchy.Mount)
	}

	idWidth := 0
	for _, c := range r.Checks {
		idWidth = max(idWidth, len(c.ID))
	}
	t := host.TriageChecks(r.Checks)
	if len(t.QoS) == 0 {
		fmt.Fprintf(w, "\nQoS: nothing to fix\n")
	} else {
		fmt.Fprintf(w, "\nQoS: %s\n", findingCounts(t.QoS))
		writeFindings(w, t.QoS, idWidth)
	}
	var fine []string
	for _, c := range t.ScaleOK {
		fine = append(fine, strings.TrimPrefix(c.ID, "limits."))
	}
	heading := fmt.Sprintf("Limits of a host of %s containers:", groupThousands(host.TargetContainers))
	switch {
	case len(t.Scale) == 0 && len(fine) == 0:
		heading = ""
	case len(t.Scale) == 0:
		heading += fmt.Sprintf(" all %d fine (%s)", len(fine), strings.Join(fine, ", "))
	case len(fine) == 0:
		heading += " " + findingCounts(t.Scale)
	default:
		heading += fmt.Sprintf(" %s; fine: %s", findingCounts(t.Scale), strings.Join(fine, ", "))
	}
	if heading != "" {
		fmt.Fprintln(w)
		for _, l := range wrapWords(heading, CheckWidth-2) {
			if !strings.HasPrefix(l, "Limits of") {
				l = "  " + l
			}
			fmt.Fprintln(w, l)
		}
		writeFindings(w, t.Scale, idWidth)
	}
	if len(t.Info) > 0 {
		fmt.Fprintf(w, "\nFor some containers, not for ddiskqos:\n")
		writeFindings(w, t.Info, idWidth)
	}

	if len(r.Devices) > 0 {
		rows := [][]string{{"DEVICE", "DEV", "KIND", "SCHEDULER", "MECHANISM", "WEIGHTS", "TARGET"}}
		for _, d := range r.Devices {
			weights := "no"
			if d.WeightsEffective {
				weights = "yes"
			}
			target := "yes"
			if !d.Target {
				target = "no: " + d.TargetReason
			}
			sched := d.Scheduler
			if sched == "" {
				sched = "-"
			}
			rows = append(rows, []string{d.Name, d.Dev, d.Kind, sched, string(d.Mechanism), weights, target})
		}
		fmt.Fprintln(w)
		writeCheckColumns(w, rows)
	}
	if len(t.OK) > 0 {
		fmt.Fprintf(w, "\nFine:\n")
		writeFindings(w, t.OK, idWidth)
	}
	fmt.Fprintln(w)
	if r.QoSPossible {
		fmt.Fprintln(w, "exit 0: QoS can work; the warnings say how to do better (--json for every detail)")
	} else {
		fmt.Fprintln(w, "exit 1: QoS cannot work until the failed checks are fixed")
	}
}

// findingCounts is "1 fail, 3 warn" of the findings cs.
func findingCounts(cs []host.Check) string {
	var parts []string
	for _, s := range []host.Status{host.StatusFail, host.StatusWarn} {
		n := 0
		for _, c := range cs {
			if c.Status == s {
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return strings.Join(parts, ", ")
}

// groupThousands is n with commas: 10,000.
func groupThousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// writeFindings prints each check as "  STATUS  ID  VALUE", the value
// wrapped under itself, then for a check that is not ok its why (prose,
// wrapped) and its fix (see fixLines).
func writeFindings(w io.Writer, cs []host.Check, idWidth int) {
	valueCol := 2 + 4 + 2 + idWidth + 2
	pad := strings.Repeat(" ", 2+4+2)
	for _, c := range cs {
		for i, l := range wrapWords(c.Value, CheckWidth-valueCol) {
			if i == 0 {
				fmt.Fprintf(w, "  %-4s  %-*s  %s\n", c.Status, idWidth, c.ID, l)
			} else {
				fmt.Fprintf(w, "%*s%s\n", valueCol, "", l)
			}
		}
		if c.Status == host.StatusOK {
			continue
		}
		for _, f := range []struct{ label, text string }{{"why: ", c.Why}, {"fix: ", c.Fix}} {
			if f.text == "" {
				continue
			}
			lines := wrapWords(f.text, CheckWidth-len(pad)-len(f.label))
			if f.label == "fix: " {
				lines = fixLines(f.text, CheckWidth-len(pad)-len(f.label))
			}
			for i, l := range lines {
				lead := f.label
				if i > 0 {
					lead = strings.Repeat(" ", len(f.label))
				}
				fmt.Fprintf(w, "%s%s%s\n", pad, lead, l)
			}
		}
	}
}

// wrapWords fills text into lines of at most width columns, breaking at
// spaces; a word longer than width gets a line of its own.
func wrapWords(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// fixLines lays out a fix so that it can still be pasted into a shell: a
// chain of commands ("a && b && c") one command a line, each line but the
// last ending in "&&"; a command still wider than width broken at a space
// outside quotes with a trailing backslash. A fix that is no chain is
// prose (it names a file to edit, a boot flag) and is wrapped as prose.
func fixLines(fix string, width int) []string {
	if !strings.Contains(fix, " && ") {
		return wrapWords(fix, width)
	}
	var lines []string
	cmds := strings.Split(fix, " && ")
	for i, cmd := range cmds {
		suffix := " &&"
		if i == len(cmds)-1 {
			suffix = ""
		}
		parts := shellBreak(cmd, width-len(suffix))
		for j, p := range parts {
			if j < len(parts)-1 {
				lines = append(lines, p+" \\")
			} else {
				lines = append(lines, p+suffix)
			}
		}
	}
	return lines
}

// shellBreak splits a command into pieces of at most width-2 columns (room
// for " \\"), breaking only at spaces outside quotes; a piece that cannot
// be broken stays whole.
func shellBreak(cmd string, width int) []string {
	if len(cmd) <= width {
		return []string{cmd}
	}
	var breaks []int // indexes of spaces outside quotes
	var quote byte
	for i := 0; i < len(cmd); i++ {
		switch ch := cmd[i]; {
		case quote != 0:
			if ch == quote {
				quote = 0
			}
		case ch == '\'' || ch == '"':
			quote = ch
		case ch == ' ':
			breaks = append(breaks, i)
		}
	}
	var out []string
	start := 0
	for len(cmd)-start > width {
		cut := -1
		for _, b := range breaks {
			if b > start && b-start <= width-2 {
				cut = b
			}
		}
		if cut < 0 {
			break
		}
		out = append(out, cmd[start:cut])
		start = cut + 1
	}
	return append(out, cmd[start:])
}

// writeCheckColumns prints rows left-aligned in columns two spaces apart.
func writeCheckColumns(w io.Writer, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		for i, cell := range row {
			if i == len(row)-1 {
				b.WriteString(cell)
				break
			}
			fmt.Fprintf(&b, "%-*s  ", widths[i], cell)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}
