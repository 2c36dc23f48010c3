package view

import (
	"slices"
	"strings"

	"github.com/rivo/uniseg"
)

// width is how many terminal cells s takes.
func width(s string) int { return uniseg.StringWidth(s) }

// pad fits s into exactly n cells: cut with "…" when longer, padded with
// spaces (on the left when right-aligned) when shorter.
func pad(s string, n int, right bool) string {
	w := width(s)
	if w > n {
		return cut(s, n)
	}
	sp := strings.Repeat(" ", n-w)
	if right {
		return sp + s
	}
	return s + sp
}

// cut cuts s to at most n cells, ending in "…" when cut; graphemes are
// never split.
func cut(s string, n int) string {
	if width(s) <= n {
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

// align lays rows out in columns as wide as their widest cell, two spaces
// apart; right[i] aligns column i to the right.
func align(rows [][]string, right []bool) []string {
	var widths []int
	for _, r := range rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], width(c))
		}
	}
	out := make([]string, len(rows))
	for j, r := range rows {
		var b strings.Builder
		for i, c := range r {
			if i > 0 {
				b.WriteString("  ")
			}
			b.WriteString(pad(c, widths[i], i < len(right) && right[i]))
		}
		out[j] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// column is one column of a table laid out to a screen's width, its cells
// made from a row of type T.
type column[T any] struct {
	head string
	min  int // width at least
	// right aligns the cells to the right.
	right bool
	// drop: when the screen is narrow, columns with a higher drop go
	// first; 0 never goes.
	drop int
	// shrink (the first column, a name): at most 40 wide, counted at min
	// while columns are dropped, then it gives up what is still missing.
	shrink bool
	// edge (the last column): counted at min while columns are dropped,
	// cut at the screen's edge.
	edge bool
	cell func(T) string
}

// colGap is the space between two columns.
const colGap = 2

// fit picks the columns that fit width and the width each gets: every
// column is as wide as its longest cell; while they do not fit, the
// droppable ones go, highest drop first, counting a shrink or edge column
// at its minimum; then the shrink column gives up what is still missing
// (beyond what the edge column, cut at the screen's edge, absorbs).
func fit[T any](all []column[T], rows []T, screen int) ([]column[T], []int) {
	var cols []column[T]
	var widths []int
	for _, c := range all {
		w := width(c.head)
		for _, r := range rows {
			w = max(w, width(c.cell(r)))
		}
		if c.shrink {
			w = min(w, 40)
		}
		cols, widths = append(cols, c), append(widths, max(w, c.min))
	}
	need := func() int {
		n := 0
		for i, c := range cols {
			if c.shrink || c.edge {
				n += c.min
			} else {
				n += widths[i]
			}
		}
		return n + colGap*(len(cols)-1)
	}
	for need() > screen {
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
	total := colGap * (len(cols) - 1)
	for _, w := range widths {
		total += w
	}
	if cols[0].shrink && total > screen {
		over := total - screen
		if last := len(cols) - 1; cols[last].edge {
			over -= widths[last] - cols[last].min
		}
		widths[0] = max(widths[0]-max(over, 0), cols[0].min)
	}
	return cols, widths
}

// heads is the column names of cols.
func heads[T any](cols []column[T]) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.head
	}
	return out
}

// cells is r's cells in cols, into out.
func cells[T any](cols []column[T], r T, out []string) []string {
	out = out[:0]
	for _, c := range cols {
		out = append(out, c.cell(r))
	}
	return out
}

// row lays out cells in columns of the given widths, two spaces apart.
func row[T any](cols []column[T], widths []int, cells []string) string {
	var b strings.Builder
	for i, c := range cols {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", colGap))
		}
		b.WriteString(pad(cells[i], widths[i], c.right))
	}
	return strings.TrimRight(b.String(), " ")
}
