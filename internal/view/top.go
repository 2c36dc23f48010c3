package view

// The model of `ddiskqos top`: what it shows, in what order, formatted
// how, for a screen of a given size. No terminal here (internal/view/tui
// draws the lines), so the tests drive it with snapshots and a clock.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Style is how a line is drawn; internal/view/tui maps it to terminal
// attributes.
type Style int

const (
	Plain   Style = iota
	Title         // the first line, reversed
	Heading       // a table's column names, bold
	Alert         // degraded, unreachable: red
	Dim           // hints, empty states
)

// Line is one row of the screen, already cut to the screen's width.
type Line struct {
	Text  string
	Style Style
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

// Top is what `ddiskqos top` knows: the newest snapshot, the level
// of every workload in the one before it, the changes seen so far, the
// order asked for, and whether the last fetch failed.
type Top struct {
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

// NewTop is the model of top asking the daemon at addr, its workloads in
// the order sortBy (one of Sorts) until a key changes it.
func NewTop(addr, sortBy string) *Top {
	return &Top{addr: addr, sort: sortBy, loc: time.Local}
}

// Key handles a key press: a sort key changes the order, q quits.
func (m *Top) Key(r rune) (quit bool) {
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

// Observe takes the next snapshot: every workload whose level differs
// from the previous snapshot's is a change, and so is one that came or
// went. The first snapshot is the baseline (no changes). A snapshot of
// the same tick as the last is ignored.
func (m *Top) Observe(s *snapshot.Snapshot) {
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

// FetchFailed records a failed fetch; the last snapshot stays on screen.
func (m *Top) FetchFailed(err error, at time.Time) {
	m.fetchErr = Explain(err, m.addr)
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

// topColumns are the columns of the workloads table, in order; on a
// narrow screen the highest drop goes first.
var topColumns = []column[*snapshot.Workload]{
	{head: "NAME", min: 8, shrink: true, cell: func(w *snapshot.Workload) string { return Cell(w.Name) }},
	{head: "LEVEL", min: 6, cell: level},
	{head: "READ/s", min: 7, right: true, cell: func(w *snapshot.Workload) string { return rateText(w.ReadBps) }},
	{head: "WRITE/s", min: 7, right: true, cell: func(w *snapshot.Workload) string { return rateText(w.WriteBps) }},
	{head: "ACTION", min: 6, drop: 2, cell: actions},
	{head: "IN-LEVEL", min: 8, drop: 3, cell: inLevel},
	// Who waits (the eBPF sensor): the worst p99 of the last tick, kept
	// longest of the droppable columns; the requests in flight, dropped
	// first.
	{head: "P99", min: 5, right: true, drop: 1, cell: p99},
	{head: "IN-FLIGHT", min: 4, right: true, drop: 7, cell: inFlight},
	{head: "PSI", min: 5, right: true, drop: 4, cell: func(w *snapshot.Workload) string { return pressure(w.Pressure) }},
	{head: "ID", min: 12, drop: 5, cell: func(w *snapshot.Workload) string { return ShortID(w.ID) }},
	{head: "MECHANISM", min: 16, drop: 6, edge: true, cell: func(w *snapshot.Workload) string { return mechanisms(w.Applied) }},
}

// Render lays the model out on a width × height screen at now. Top to
// bottom: the title; health (each reason the daemon is degraded, or why
// the last fetch failed); the level counts; the devices; the workloads in
// the chosen order (as many as fit); the recent level changes (newest
// first, at least a few lines when the screen allows); the key hints.
func (m *Top) Render(width, height int, now time.Time) []Line {
	if width <= 0 || height <= 0 {
		return nil
	}
	s := m.snap
	var top []Line
	add := func(style Style, format string, a ...any) {
		top = append(top, Line{Text: fmt.Sprintf(format, a...), Style: style})
	}
	title := fmt.Sprintf("ddiskqos top  %s  tick %d, %s ago, every %s  sort: %s",
		m.addr, s.Tick, Age(now.Sub(s.At)), s.Interval, m.sort)
	add(Title, "%s", pad(title, width, false))
	if m.fetchErr != "" {
		first, _, _ := strings.Cut(m.fetchErr, "\n")
		add(Alert, "UNREACHABLE for %s: %s (showing the last answer)", Age(now.Sub(m.fetchErrAt)), first)
	}
	reasons := api.Degraded(s, now)
	for _, r := range reasons {
		add(Alert, "DEGRADED: %s", Cell(r))
	}
	dry := ""
	if s.DryRun {
		dry = ", DRY-RUN (nothing is written)"
	}
	health := "ok"
	if len(reasons) > 0 {
		health = "degraded"
	}
	add(Plain, "health %s; source %s, actuator %s, cgroup %s%s", health, OrDash(s.Source), OrDash(s.Actuator), OrDash(s.CgroupMode), dry)
	levels := fmt.Sprintf("levels  1: %d  2: %d  3: %d  4: %d  exempt: %d", s.Levels[1], s.Levels[2], s.Levels[3], s.Levels[4], s.Levels[0])
	if p := s.HostPressure; p != nil {
		levels += fmt.Sprintf("   host I/O pressure some %.1f%% full %.1f%%", p.SomeAvg10, p.FullAvg10)
	}
	if len(s.Errors) > 0 {
		parts := make([]string, len(s.Errors))
		for i, e := range s.Errors {
			parts[i] = fmt.Sprintf("%s %d", Cell(e.Cause), e.Count)
		}
		levels += "   errors: " + strings.Join(parts, ", ")
	}
	add(Plain, "%s", levels)
	top = append(top, m.renderDevices(width)...)

	// The workloads take what the rest leaves, but the changes pane keeps
	// its heading and up to 6 changes (when 3 workload rows still fit);
	// the changes pane gets what the workloads leave over.
	ws := Order(s.Workloads, m.sort)
	cols, widths := fit(topColumns, ws, width)
	hints := Line{Text: "q quit   sort: r rate, l level, n name", Style: Dim}
	chg := m.renderChanges()
	room := height - len(top) - 1 // the hints
	keep := 1 + min(len(chg), 7)  // blank, heading, changes
	if room-keep < 2+3 {
		keep = 0
	}
	rows := max(room-keep-2, 0)
	out := append(top, Line{}, Line{Text: row(cols, widths, heads(cols)), Style: Heading})
	if len(ws) == 0 {
		out = append(out, Line{Text: "no workloads", Style: Dim})
	}
	cs := make([]string, 0, len(cols))
	for i, w := range ws {
		if i >= rows {
			break
		}
		if i == rows-1 && len(ws) > rows {
			out = append(out, Line{Text: fmt.Sprintf("… %d more (a taller window shows them)", len(ws)-i), Style: Dim})
			break
		}
		out = append(out, Line{Text: row(cols, widths, cells(cols, w, cs))})
	}
	if left := height - 1 - len(out); left > 1 {
		out = append(out, Line{})
		out = append(out, chg[:min(len(chg), left-1)]...)
	}
	for len(out) < height-1 {
		out = append(out, Line{})
	}
	out = append(out[:min(len(out), height-1)], hints)
	for i := range out {
		out[i].Text = cut(out[i].Text, width)
	}
	return out
}

// renderDevices is the devices table: per device the mechanism, the best
// level doing I/O there (what the throttle keys on), the device's rate,
// the capacity the throttle estimates (its caps are shares of it), and
// how many workloads are capped there now with the lowest cap, so
// contention shows as "level 1 ... 3 capped".
func (m *Top) renderDevices(width int) []Line {
	s := m.snap
	if len(s.Devices) == 0 {
		return []Line{{}, {Text: "no devices", Style: Dim}}
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
	var rows [][]string
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
			capText = fmt.Sprintf("%d capped, min %s/s", c.n, Bytes(c.lowest))
			if d.CappedShare > 0 { // the latency controller's share and target
				capText += fmt.Sprintf(", share %.0f %%", 100*d.CappedShare)
				if d.LatencyTarget > 0 {
					capText += ", p99 target " + latencyText(d.LatencyTarget)
				}
			}
		}
		capacity := "-"
		if d.CapacityBps > 0 {
			capacity = rateText(d.CapacityBps) + "/s"
			if d.CapacityIOPS > 0 {
				capacity += fmt.Sprintf(" %.0f IOPS", d.CapacityIOPS)
			}
		}
		rows = append(rows, []string{Cell(d.Name), OrDash(d.Dev), OrDash(d.Mechanism), OrDash(d.Scheduler), active,
			rateText(d.ReadBps), rateText(d.WriteBps), capacity, capText})
	}
	cols, widths := fit(deviceColumns, rows, width)
	out := []Line{{}, {Text: row(cols, widths, heads(cols)), Style: Heading}}
	cs := make([]string, 0, len(cols))
	for _, r := range rows {
		out = append(out, Line{Text: row(cols, widths, cells(cols, r, cs))})
	}
	return out
}

// deviceColumns are the columns of top's devices table, cells by index;
// on a narrow screen the device's number, its scheduler and the capacity
// go first, then its rates: what ddiskqos does there (MECHANISM, CAPS)
// and why (ACTIVE, the best level doing I/O) stay.
var deviceColumns = func() []column[[]string] {
	cols := []column[[]string]{
		{head: "DEVICE"}, {head: "DEV", drop: 6}, {head: "MECHANISM"}, {head: "SCHEDULER", drop: 5}, {head: "ACTIVE"},
		{head: "READ/s", right: true, drop: 3}, {head: "WRITE/s", right: true, drop: 2}, {head: "CAPACITY", drop: 4},
		{head: "CAPS"},
	}
	for i := range cols {
		cols[i].cell = func(r []string) string { return r[i] }
	}
	return cols
}()

// renderChanges is the changes pane: its heading, then one line per
// change, newest first.
func (m *Top) renderChanges() []Line {
	head := fmt.Sprintf("LEVEL CHANGES (%d seen since %s)", len(m.changes), m.since.In(m.loc).Format("15:04:05"))
	out := []Line{{Text: head, Style: Heading}}
	if len(m.changes) == 0 {
		return append(out, Line{Text: "none yet", Style: Dim})
	}
	for _, c := range m.changes {
		moved := ""
		if topChangeWhat(c) == "demoted" {
			moved = "  after " + Bytes(c.Bytes) + " in all"
		}
		out = append(out, Line{Text: fmt.Sprintf("%s  %-6s → %-6s  %-13s  %s%s",
			c.At.In(m.loc).Format("15:04:05.0"), topLevelName(c.From), topLevelName(c.To), topChangeWhat(c),
			Cell(c.Name), moved)})
	}
	return out
}
