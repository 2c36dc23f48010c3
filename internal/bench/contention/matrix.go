package contention

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"
)

// MatrixEntry is one host report of the device matrix, summarized again
// by this binary's rules (SummarizeHost over its cells), so that reports
// of different rounds are judged alike.
type MatrixEntry struct {
	File string
	R    *HostResult
	S    HostSummary
}

// ReadHostReport reads a host report's JSON (contention-host-*.json) and
// summarizes its cells again.
func ReadHostReport(path string) (MatrixEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return MatrixEntry{}, err
	}
	var r HostResult
	if err := json.Unmarshal(b, &r); err != nil {
		return MatrixEntry{}, fmt.Errorf("%s: not a host report: %w", path, err)
	}
	if r.Scenario != ScenarioHost || len(r.Cells) == 0 {
		return MatrixEntry{}, fmt.Errorf("%s: scenario %q with %d cells: not a host report", path, r.Scenario, len(r.Cells))
	}
	return MatrixEntry{File: filepath.Base(path), R: &r, S: SummarizeHost(&r)}, nil
}

// ReadMatrix reads every contention-host-*.json in dir, sorted by device
// class, then greedy before paced neighbours.
func ReadMatrix(dir string) ([]MatrixEntry, error) {
	files, err := filepath.Glob(filepath.Join(dir, "contention-host-*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no host report (contention-host-*.json)", dir)
	}
	var es []MatrixEntry
	for _, f := range files {
		e, err := ReadHostReport(f)
		if err != nil {
			return nil, err
		}
		es = append(es, e)
	}
	slices.SortStableFunc(es, func(a, b MatrixEntry) int {
		return cmp.Or(cmp.Compare(a.R.Plan.Device, b.R.Plan.Device), cmp.Compare(a.R.Scheduler, b.R.Scheduler),
			cmp.Compare(a.R.Plan.Streamer, b.R.Plan.Streamer)) // "" (greedy) first
	})
	return es, nil
}

// BestPeer is the peer of the run (a static or re-armed cap, or the
// device's scheduler: no ddiskqos, no QoS, idle) that gives the streamer
// the largest share with both victims' p99 within limit× idle; with none
// within it, the peer whose worse victim is the least slowed. ok is
// false when the run has no peer.
func BestPeer(s HostSummary, limit float64) (row HostRow, within, ok bool) {
	worst := func(r HostRow) float64 { return math.Max(r.WebP99.Median, r.LightP99.Median) }
	for _, r := range s.Rows {
		if r.Config == Idle || r.Config == Original || strings.HasPrefix(string(r.Config), string(DDiskQoS)) {
			continue
		}
		w := worst(r) <= limit
		better := !ok || w && !within ||
			w == within && (w && r.During.Median > row.During.Median || !w && worst(r) < worst(row))
		if better {
			row, within, ok = r, w, true
		}
	}
	return row, within, ok
}

// WriteMatrixMarkdown writes the device matrix: a summary table, per
// device class and neighbour, of no QoS, ddiskqos and the best peer of the
// same run and the bars ddiskqos missed, each row linking its report; then
// each report in full (WriteHostMarkdown's, with no plot) as a section
// "## <file name without .json>", the anchor the row links. The one
// Markdown file of the host scenario: its JSONs are the only files beside.
func WriteMatrixMarkdown(w io.Writer, es []MatrixEntry) {
	fmt.Fprintf(w, "# The device matrix: the protection and its cost per device class\n\n")
	fmt.Fprintf(w, "Written by `ddiskqos bench contention --summarize DIR` from the host reports beside it, each summarized again by this binary's rules "+
		"(its cells are the report's; the bars are today's). Victims are the web reader's and the light tenants' p99 ÷ idle of the same trial, "+
		"the share the streamer's throughput while they ran ÷ no QoS's; medians over trials, the range in brackets. "+
		"The best peer is the static or re-armed cap (or scheduler) of the same run that kept both victims within 3× idle at the largest share; "+
		"where none did, the one whose worse victim was the least slowed (marked *none within 3×*). "+
		"Each report follows the table in full, in a section of its own that its row links; its JSON, every sample, is beside this file.\n\n")
	fmt.Fprintf(w, "| device class, neighbour | report, built from, measured | no QoS: web, light | ddiskqos: web, light, share | best peer: web, light, share | bars missed |\n")
	fmt.Fprintf(w, "| --- | --- | --- | --- | --- | --- |\n")
	for _, e := range es {
		rows := map[Config]HostRow{}
		for _, r := range e.S.Rows {
			rows[r.Config] = r
		}
		o, d := rows[Original], rows[DDiskQoS]
		peer := "—"
		if p, within, ok := BestPeer(e.S, 3); ok {
			peer = fmt.Sprintf("`%s`: %s, %s, %s", p.Config, fmtX(p.WebP99), fmtX(p.LightP99), fmtPct(p.During))
			if !within {
				peer += " (*none within 3×*)"
			}
		}
		var missed []string
		for _, b := range e.S.Bars {
			if !b.Goal && !b.Met {
				missed = append(missed, b.What)
			}
		}
		bars := fmt.Sprintf("%d of %d", len(missed), countBars(e.S.Bars))
		if len(missed) > 0 {
			bars += ": " + strings.Join(missed, "; ")
		}
		if len(e.S.NotQuiet) > 0 {
			bars += " (**not a quiet host**: " + strings.Join(e.S.NotQuiet, "; ") + ")"
		}
		base := e.Base()
		fmt.Fprintf(w, "| %s | [%s](#%s), `%s`, %s | %s, %s | %s, %s, **%s** | %s | %s |\n", matrixClass(e),
			base, Anchor(base), shortRev(e.R.Build.String()),
			e.R.Start.UTC().Format("2006-01-02 15:04"), fmtX(o.WebP99), fmtX(o.LightP99), fmtX(d.WebP99), fmtX(d.LightP99), fmtPct(d.During), peer, bars)
	}
	fmt.Fprintln(w)
	for i, e := range es {
		if i > 0 {
			fmt.Fprintln(w)
		}
		title := fmt.Sprintf("## %s\n\nThe host scenario's report of %s, from [%s](%s).", e.Base(), matrixClass(e), e.File, e.File)
		writeHostReport(w, e.R, e.S, "", title, "###")
	}
}

// Base is the entry's file name without .json: its section's heading.
func (e MatrixEntry) Base() string { return strings.TrimSuffix(e.File, ".json") }

// Anchor is the fragment a Markdown renderer (GitHub's) gives the heading
// "## heading": lower case, spaces as dashes, other punctuation but - and
// _ dropped.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// matrixClass is an entry's device class, scheduler and neighbour as the
// matrix names them.
func matrixClass(e MatrixEntry) string {
	class := cmpOr(e.R.Plan.Device, "not named")
	if e.R.Plan.NoLoop {
		class += fmt.Sprintf(" (%s, no loop device)", e.R.Device)
	}
	return class + fmt.Sprintf(", scheduler %s, %s", e.R.Scheduler, streamerName(e.R.Plan.Streamer))
}

func streamerName(s string) string {
	if s == "" {
		return "greedy (QD32, unpaced)"
	}
	return s
}

// shortRev is a build's revision cut to 12 characters, its note kept.
func shortRev(b string) string {
	rev, rest, _ := strings.Cut(b, " ")
	if len(rev) == 40 {
		rev = rev[:12]
	}
	return strings.TrimSpace(rev + " " + rest)
}
