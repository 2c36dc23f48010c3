package main

// The rendering model of `ddiskqos top`: what it shows, in what order,
// formatted how, for a screen of a given size. No terminal here (top.go
// draws the lines with tcell), so the tests drive it with snapshots and a
// clock.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rivo/uniseg"

	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// topStyle is how a line is drawn; top.go maps it to terminal attributes.
type topStyle int

const (
	topPlain   topStyle = iota
	topTitle            // the first line, reversed
	topHeading          // a table's column names, bold
	topAlert            // degraded, unreachable: red
	topDim              // hints, empty states
)

// topLine is one row of the screen, already cut to the screen's width.
type topLine struct {
	Text  string
	Style topStyle
}

// topSortKeys maps the keys that change the order of the workloads to the
// orders of `ddiskqos status --sort`.
var topSortKeys = map[rune]string{'r': "rate", 'l': "level", 'n': "name"}

// topMaxChanges is how many level changes the model remembers.
const topMaxChanges = 200

// topChange is one level change seen between two successive snapshots.
type topChange struct {
	At       time.Time
	Name, ID string
	// From and To are levels, 0 exempt; From is -1 for a new workload,
	// To -1 for one that went away.
	From, To int
	// Bytes is what the workload had moved in all when it was seen.
	Bytes uint64
}

// topModel is what `ddiskqos top` knows: the newest snapshot, the level
// of every workload in the one before it, the changes seen so far, the
// order asked for, and whether the last fetch failed.
type topModel struct {
	addr       string
	sort       string
	snap       *snapshot.Snapshot
	levels     map[string]int // by ID, of the last snapshot; 0 exempt
	since      time.Time      // when the first snapshot was taken
	changes    []topChange    // newest first
	fetchErr   string         // the last fetch's error, "" when it succeeded
	fetchErrAt time.Time
	loc        *time.Location // of the times shown
}

func newTopModel(addr, sortBy string) *topModel {
	return &topModel{addr: addr, sort: sortBy, loc: time.Local}
}

// key handles a key press: a sort key changes the order, q quits.
func (m *topModel) key(r rune) (quit bool) {
	if by, ok := topSortKeys[r]; ok {
		m.sort = by
	}
	return r == 'q' || r == 'Q'
}

// effLevel is w's level, 0 when exempt.
func effLevel(w *snapshot.Workload) int {
	if w.Exempt {
		return 0
	}
	return w.Level
}

// observe takes the next snapshot: every workload whose level differs
// from the previous snapshot's is a change, and so is one that came or
// went. The first snapshot is the baseline (no changes). A snapshot of
// the same tick as the last is ignored.
func (m *topModel) observe(s *snapshot.Snapshot) {
	m.fetchErr = ""
	if m.snap != nil && s.Tick == m.snap.Tick && s.At.Equal(m.snap.At) {
		return
	}
	levels := make(map[string]int, len(s.Workloads))
	var seen []topChange
	for _, w := range s.Workloads {
		l := effLevel(w)
		levels[w.ID] = l
		if m.levels == nil {
			continue
		}
		prev, ok := m.levels[w.ID]
		if ok && prev == l {
			continue
		}
		c := topChange{At: s.At, Name: w.Name, ID: w.ID, From: -1, To: l, Bytes: w.ReadBytes + w.WriteBytes}
		if ok {
			c.From = prev
			// The daemon's own time of the change, when it falls between
			// the two snapshots.
			if !w.LevelSince.IsZero() && w.LevelSince.After(m.snap.At) && !w.LevelSince.After(s.At) {
				c.At = w.LevelSince
			}
		}
		seen = append(seen, c)
	}
	if m.levels != nil {
		names := make(map[string]string, len(m.snap.Workloads))
		for _, w := range m.snap.Workloads {
			names[w.ID] = w.Name
		}
		for id, l := range m.levels {
			if _, ok := levels[id]; !ok {
				seen = append(seen, topChange{At: s.At, Name: names[id], ID: id, From: l, To: -1})
			}
		}
	} else {
		m.since = s.At
	}
	// Newest first; within one snapshot by name.
	slices.SortFunc(seen, func(a, b topChange) int {
		return cmp.Or(b.At.Compare(a.At), strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	m.changes = append(seen, m.changes...)
	if len(m.changes) > topMaxChanges {
		m.changes = m.changes[:topMaxChanges]
	}
	m.snap, m.levels = s, levels
}

// fetchFailed records a failed fetch; the last snapshot stays on screen.
func (m *topModel) fetchFailed(err error, at time.Time) {
	m.fetchErr = statusExplain(err, m.addr)
	m.fetchErrAt = at
}

// topLevelName is a level as the changes pane shows it.
func topLevelName(l int) string {
	switch l {
	case -1:
		return "-"
	case 0:
		return "exempt"
	default:
		return "L" + strconv.Itoa(l)
	}
}

// topChangeWhat says what a change means to the workload.
func topChangeWhat(c topChange) string {
	switch {
	case c.From == -1:
		return "new"
	case c.To == -1:
		return "gone"
	case c.To == 0:
		return "exempted"
	case c.From == 0:
		return "managed again"
	case c.To > c.From:
		return "demoted"
	default:
		return "promoted"
	}
}

// topColumn is one column of the workloads table.
type topColumn struct {
	head  string
	width int // at least

	right bool
	drop  int // columns with a higher drop go first when the screen is narrow; 0 never
	cell  func(w *snapshot.Workload) string
}

var topColumns = []topColumn{
	{head: "NAME", width: 8, cell: func(w *snapshot.Workload) string { return statusCell(w.Name) }},
	{head: "LEVEL", width: 6, cell: statusLevel},
	{head: "READ/s", width: 7, right: true, cell: func(w *snapshot.Workload) string { return humanBytes(rate(w.ReadBps)) }},
	{head: "WRITE/s", width: 7, right: true, cell: func(w *snapshot.Workload) string { return humanBytes(rate(w.WriteBps)) }},
	{head: "WEIGHT/CAP", width: 6, drop: 2, cell: statusWeight},
	{head: "IN-LEVEL", width: 8, drop: 3, cell: statusInLevel},
	{head: "PSI", width: 5, right: true, drop: 4, cell: func(w *snapshot.Workload) string { return statusPressure(w.Pressure) }},
	{head: "ID", width: 12, drop: 5, cell: func(w *snapshot.Workload) string { return shortID(w.ID) }},
	{head: "MECHANISM", width: 16, drop: 6, cell: func(w *snapshot.Workload) string {
		return statusMechanisms(w.Applied, !statusThrottleOnly(w))
	}},
}

// topColumnsFor picks the columns that fit width and the width each
// gets: every column is as wide as its longest cell (NAME at most 40);
// while they do not fit, the droppable ones go, highest drop first,
// counting NAME at 8 and MECHANISM (the last, cut at the screen's edge)
// at its minimum; then NAME gives up what is still missing.
func topColumnsFor(ws []*snapshot.Workload, width int) ([]topColumn, []int) {
	const gap = 2
	var cols []topColumn
	var widths []int
	for _, c := range topColumns {
		w := uniseg.StringWidth(c.head)
		for _, wl := range ws {
			w = max(w, uniseg.StringWidth(c.cell(wl)))
		}
		if c.head == "NAME" {
			w = min(w, 40)
		}
		cols, widths = append(cols, c), append(widths, max(w, c.width))
	}
	need := func() int {
		n := 0
		for i, c := range cols {
			switch c.head {
			case "NAME", "MECHANISM":
				n += c.width
			default:
				n += widths[i]
			}
		}
		return n + gap*(len(cols)-1)
	}
	for need() > width {
		worst := -1
		for i, c := range cols {
			if c.drop > 0 && (worst < 0 || c.drop > cols[worst].drop) {
				worst = i
			}
		}
		if worst < 0 {
			break
		}
		cols, widths = slices.Delete(cols, worst, worst+1), slices.Delete(widths, worst, worst+1)
	}
	total := gap * (len(cols) - 1)
	for _, w := range widths {
		total += w
	}
	if cols[0].head == "NAME" && total > width {
		// MECHANISM, when still there, is cut at the edge instead.
		over := total - width
		if last := len(cols) - 1; cols[last].head == "MECHANISM" {
			over -= widths[last] - cols[last].width
		}
		widths[0] = max(widths[0]-max(over, 0), cols[0].width)
	}
	return cols, widths
}

// topRow lays out cells in columns of the given widths, two spaces apart.
func topRow(cols []topColumn, widths []int, cells []string) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString("  ")
		}
		b.WriteString(topPad(cells[i], widths[i], c.right))
	}
	return strings.TrimRight(b.String(), " ")
}

// topPad fits s into exactly n cells: cut with "…" when longer, padded
// with spaces (on the left when right-aligned) when shorter.
func topPad(s string, n int, right bool) string {
	w := uniseg.StringWidth(s)
	if w > n {
		return topCut(s, n)
	}
	pad := strings.Repeat(" ", n-w)
	if right {
		return pad + s
	}
	return s + pad
}

// topCut cuts s to at most n cells, ending in "…" when cut; graphemes
// are never split.
func topCut(s string, n int) string {
	if uniseg.StringWidth(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	var b strings.Builder
	used := 0
	g := uniseg.NewGraphemes(s)
	for g.Next() {
		if used+g.Width() > n-1 {
			break
		}
		b.WriteString(g.Str())
		used += g.Width()
	}
	return b.String() + "…"
}

// render lays the model out on a width × height screen at now. Top to
// bottom: the title; health (each reason the daemon is degraded, or why
// the last fetch failed); the level counts; the devices; the workloads in
// the chosen order (as many as fit); the recent level changes (newest
// first, at least a few lines when the screen allows); the key hints.
func (m *topModel) render(width, height int, now time.Time) []topLine {
	if width <= 0 || height <= 0 {
		return nil
	}
	s := m.snap
	var top []topLine
	add := func(style topStyle, format string, a ...any) {
		top = append(top, topLine{Text: fmt.Sprintf(format, a...), Style: style})
	}
	title := fmt.Sprintf("ddiskqos top  %s  tick %d, %s ago, every %s  sort: %s",
		m.addr, s.Tick, statusAge(now.Sub(s.At)), s.Interval, m.sort)
	add(topTitle, "%s", topPad(title, width, false))
	if m.fetchErr != "" {
		first, _, _ := strings.Cut(m.fetchErr, "\n")
		add(topAlert, "UNREACHABLE for %s: %s (showing the last answer)", statusAge(now.Sub(m.fetchErrAt)), first)
	}
	reasons := api.Degraded(s, now)
	for _, r := range reasons {
		add(topAlert, "DEGRADED: %s", statusCell(r))
	}
	dry := ""
	if s.DryRun {
		dry = ", DRY-RUN (nothing is written)"
	}
	health := "ok"
	if len(reasons) > 0 {
		health = "degraded"
	}
	add(topPlain, "health %s; source %s, actuator %s, cgroup %s%s", health, orDash(s.Source), orDash(s.Actuator), orDash(s.CgroupMode), dry)
	levels := fmt.Sprintf("levels  1: %d  2: %d  3: %d  4: %d  exempt: %d", s.Levels[1], s.Levels[2], s.Levels[3], s.Levels[4], s.Levels[0])
	if p := s.HostPressure; p != nil {
		levels += fmt.Sprintf("   host I/O pressure some %.1f%% full %.1f%%", p.SomeAvg10, p.FullAvg10)
	}
	if len(s.Errors) > 0 {
		parts := make([]string, len(s.Errors))
		for i, e := range s.Errors {
			parts[i] = fmt.Sprintf("%s %d", statusCell(e.Cause), e.Count)
		}
		levels += "   errors: " + strings.Join(parts, ", ")
	}
	add(topPlain, "%s", levels)
	top = append(top, m.renderDevices()...)

	// The workloads take what the rest leaves, but the changes pane keeps
	// its heading and up to 6 changes (when 3 workload rows still fit);
	// the changes pane gets what the workloads leave over.
	ws := statusOrder(s.Workloads, m.sort)
	cols, widths := topColumnsFor(ws, width)
	head := make([]string, len(cols))
	for i, c := range cols {
		head[i] = c.head
	}
	hints := topLine{Text: "q quit   sort: r rate, l level, n name", Style: topDim}
	chg := m.renderChanges()
	room := height - len(top) - 1 // the hints
	keep := 1 + min(len(chg), 7)  // blank, heading, changes
	if room-keep < 2+3 {
		keep = 0
	}
	rows := max(room-keep-2, 0)
	out := append(top, topLine{}, topLine{Text: topRow(cols, widths, head), Style: topHeading})
	if len(ws) == 0 {
		out = append(out, topLine{Text: "no workloads", Style: topDim})
	}
	cells := make([]string, len(cols))
	for i, w := range ws {
		if i >= rows {
			break
		}
		if i == rows-1 && len(ws) > rows {
			out = append(out, topLine{Text: fmt.Sprintf("… %d more (a taller window shows them)", len(ws)-i), Style: topDim})
			break
		}
		for j, c := range cols {
			cells[j] = c.cell(w)
		}
		out = append(out, topLine{Text: topRow(cols, widths, cells)})
	}
	if left := height - 1 - len(out); left > 1 {
		out = append(out, topLine{})
		out = append(out, chg[:min(len(chg), left-1)]...)
	}
	for len(out) < height-1 {
		out = append(out, topLine{})
	}
	out = append(out[:min(len(out), height-1)], hints)
	for i := range out {
		out[i].Text = topCut(out[i].Text, width)
	}
	return out
}

// renderDevices is the devices table: per device the mechanism, the best
// level doing I/O there (what the throttle keys on), the device's rate,
// the capacity the throttle estimates (its caps are shares of it), and
// how many workloads are capped there now with the lowest cap, so
// contention shows as "level 1 ... 3 capped".
func (m *topModel) renderDevices() []topLine {
	s := m.snap
	if len(s.Devices) == 0 {
		return []topLine{{}, {Text: "no devices", Style: topDim}}
	}
	type caps struct {
		n      int
		lowest uint64
	}
	capped := map[string]*caps{}
	for _, w := range s.Workloads {
		for _, a := range w.Applied {
			if !a.Throttled {
				continue
			}
			c := capped[a.Device]
			if c == nil {
				c = &caps{}
				capped[a.Device] = c
			}
			c.n++
			for _, l := range []uint64{a.ReadBps, a.WriteBps} {
				if l > 0 && (c.lowest == 0 || l < c.lowest) {
					c.lowest = l
				}
			}
		}
	}
	rows := [][]string{{"DEVICE", "DEV", "MECHANISM", "SCHEDULER", "ACTIVE", "READ/s", "WRITE/s", "CAPACITY", "CAPS"}}
	devs := slices.Clone(s.Devices)
	slices.SortFunc(devs, func(a, b snapshot.Device) int { return strings.Compare(a.Name, b.Name) })
	for _, d := range devs {
		active := "idle"
		if d.TopActiveLevel > 0 {
			active = "level " + strconv.Itoa(d.TopActiveLevel)
		}
		capText := "-"
		if mech.HasCaps(d.Mechanism) {
			capText = "none in force"
		}
		if c := capped[d.Name]; c != nil {
			capText = fmt.Sprintf("%d capped, lowest %s/s", c.n, humanBytes(c.lowest))
		}
		capacity := "-"
		if d.CapacityBps > 0 {
			capacity = humanBytes(rate(d.CapacityBps)) + "/s"
			if d.CapacityIOPS > 0 {
				capacity += fmt.Sprintf(" %.0f IOPS", d.CapacityIOPS)
			}
		}
		rows = append(rows, []string{statusCell(d.Name), orDash(d.Dev), orDash(d.Mechanism), orDash(d.Scheduler), active,
			humanBytes(rate(d.ReadBps)), humanBytes(rate(d.WriteBps)), capacity, capText})
	}
	out := []topLine{{}}
	for i, r := range topAlign(rows, []bool{5: true, 6: true, 7: false}) {
		st := topPlain
		if i == 0 {
			st = topHeading
		}
		out = append(out, topLine{Text: r, Style: st})
	}
	return out
}

// topAlign lays rows out in columns as wide as their widest cell, two
// spaces apart; right[i] aligns column i to the right.
func topAlign(rows [][]string, right []bool) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], uniseg.StringWidth(c))
		}
	}
	out := make([]string, len(rows))
	for j, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(topPad(c, widths[i], i < len(right) && right[i]))
		}
		out[j] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// renderChanges is the changes pane: its heading, then one line per
// change, newest first.
func (m *topModel) renderChanges() []topLine {
	head := fmt.Sprintf("LEVEL CHANGES (%d seen since %s)", len(m.changes), m.since.In(m.loc).Format("15:04:05"))
	out := []topLine{{Text: head, Style: topHeading}}
	if len(m.changes) == 0 {
		return append(out, topLine{Text: "none yet", Style: topDim})
	}
	for _, c := range m.changes {
		moved := ""
		if topChangeWhat(c) == "demoted" {
			moved = "  after " + humanBytes(c.Bytes) + " in all"
		}
		out = append(out, topLine{Text: fmt.Sprintf("%s  %-6s → %-6s  %-13s  %s%s",
			c.At.In(m.loc).Format("15:04:05.0"), topLevelName(c.From), topLevelName(c.To), topChangeWhat(c),
			statusCell(c.Name), moved)})
	}
	return out
}
