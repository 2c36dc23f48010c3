package view

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// Sorts are the orders of the workloads (status --sort, top's keys).
var Sorts = []string{"name", "level", "rate"}

// Order returns the workloads in the order asked for (one of Sorts); ties
// fall back to name, then ID, so the order never depends on the daemon's.
func Order(ws []*snapshot.Workload, by string) []*snapshot.Workload {
	out := slices.Clone(ws)
	byName := func(a, b *snapshot.Workload) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	}
	// Exempt (0) sorts after level 4.
	rank := func(w *snapshot.Workload) int {
		if w.Exempt || w.Level == 0 {
			return 5
		}
		return w.Level
	}
	switch by {
	case "level":
		slices.SortFunc(out, func(a, b *snapshot.Workload) int {
			return cmp.Or(cmp.Compare(rank(a), rank(b)), byName(a, b))
		})
	case "rate":
		slices.SortFunc(out, func(a, b *snapshot.Workload) int {
			return cmp.Or(cmp.Compare(b.ReadBps+b.WriteBps, a.ReadBps+a.WriteBps), byName(a, b))
		})
	default:
		slices.SortFunc(out, byName)
	}
	return out
}

// FilterText says which filters chose the workloads shown ("" for none).
func FilterText(level, name string) string {
	var f []string
	if level != "" {
		f = append(f, "--level "+level)
	}
	if name != "" {
		f = append(f, "--name "+strconv.Quote(name))
	}
	return strings.Join(f, " ")
}

// Explain turns an error asking the daemon at addr into what an operator
// does next.
func Explain(err error, addr string) string {
	var he *api.HTTPError
	if errors.As(err, &he) {
		// The body is the daemon's (or whatever listens there): escaped
		// like every cell before it reaches the terminal.
		e := &api.HTTPError{Code: he.Code, Msg: Cell(he.Msg)}
		if he.Code == http.StatusServiceUnavailable {
			return fmt.Sprintf("the daemon at %s is not ready: %s\ntry again in a moment", addr, e.Msg)
		}
		if he.Code == http.StatusNotFound {
			return fmt.Sprintf("%s answered %v\nis it ddiskqos (of the same version) listening there?", addr, e)
		}
		return fmt.Sprintf("the daemon at %s answered %v", addr, e)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("the daemon at %s did not answer in time (--timeout)", addr)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Sprintf("daemon not reachable at %s: %v\nis `ddiskqos run` running? it listens on --listen (default %s); point --addr there",
		addr, err, api.DefaultAddr)
}

// Status writes `ddiskqos status`: the header, the workloads ws (chosen
// from s by filters, in their order), notes and the devices, as of now.
func Status(w io.Writer, s *snapshot.Snapshot, ws []*snapshot.Workload, addr, filters string, now time.Time) {
	dry := "no"
	if s.DryRun {
		dry = "yes (nothing is written)"
	}
	fmt.Fprintf(w, "ddiskqos at %s: tick %d, %s ago (every %s, took %s)\n",
		addr, s.Tick, Age(now.Sub(s.At)), s.Interval, s.TickDuration.Round(10*time.Microsecond))
	// What makes /healthz answer 503, plainly, before anything else.
	for _, reason := range api.Degraded(s, now) {
		fmt.Fprintf(w, "DEGRADED: %s\n", Cell(reason))
	}
	fmt.Fprintf(w, "source %s, actuator %s, cgroup %s, dry-run %s\n",
		OrDash(s.Source), OrDash(s.Actuator), OrDash(s.CgroupMode), dry)
	total := 0
	for _, n := range s.Levels {
		total += n
	}
	fmt.Fprintf(w, "workloads %d: level 1: %d, level 2: %d, level 3: %d, level 4: %d, exempt: %d\n",
		total, s.Levels[1], s.Levels[2], s.Levels[3], s.Levels[4], s.Levels[0])
	if len(s.Errors) > 0 {
		errs := slices.Clone(s.Errors)
		slices.SortFunc(errs, func(a, b snapshot.ErrorCount) int { return strings.Compare(a.Cause, b.Cause) })
		parts := make([]string, len(errs))
		for i, e := range errs {
			parts[i] = fmt.Sprintf("%s %d", Cell(e.Cause), e.Count)
		}
		fmt.Fprintf(w, "errors since start: %s (see the daemon's log)\n", strings.Join(parts, ", "))
	}
	if p := s.HostPressure; p != nil {
		fmt.Fprintf(w, "host I/O pressure (avg10): some %.2f%%, full %.2f%%\n", p.SomeAvg10, p.FullAvg10)
	}
	hostHealth(w, s.Health)

	fmt.Fprintln(w)
	if filters != "" {
		fmt.Fprintf(w, "showing %d of %d workloads (%s)\n", len(ws), total, filters)
	}
	var notes []string
	if len(ws) == 0 {
		fmt.Fprintln(w, "no workloads")
	} else {
		// A new column is one more heading here and one more cell
		// function in workload.go, which top shares.
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tLEVEL\tACTION\tIN-LEVEL\tREAD/s\tWRITE/s\tP99\tIN-FLIGHT\tPRESSURE\tMECHANISM")
		for _, wl := range ws {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				Cell(wl.Name), ShortID(wl.ID), level(wl), actions(wl), inLevel(wl),
				rateText(wl.ReadBps), rateText(wl.WriteBps), p99(wl), inFlight(wl), pressure(wl.Pressure), mechanisms(wl.Applied))
			notes = append(notes, workloadNotes(wl)...)
		}
		tw.Flush()
	}
	if len(notes) > 0 {
		fmt.Fprintln(w, "\nnotes:")
		for _, n := range notes {
			fmt.Fprintf(w, "  %s\n", n)
		}
	}

	fmt.Fprintln(w)
	if len(s.Devices) == 0 {
		fmt.Fprintln(w, "no devices")
		return
	}
	devs := slices.Clone(s.Devices)
	slices.SortFunc(devs, func(a, b snapshot.Device) int { return strings.Compare(a.Name, b.Name) })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tDEV\tSCHEDULER\tMECHANISM\tWEIGHTS\tTOP-LEVEL\tREAD/s\tWRITE/s\tHEALTH")
	for _, d := range devs {
		eff := "no"
		if d.WeightsEffective {
			eff = "yes"
		}
		top := "idle"
		if d.TopActiveLevel > 0 {
			top = strconv.Itoa(d.TopActiveLevel)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			Cell(d.Name), OrDash(d.Dev), OrDash(d.Scheduler), OrDash(d.Mechanism), eff, top,
			rateText(d.ReadBps), rateText(d.WriteBps), deviceHealth(s.Health, d.Name))
	}
	tw.Flush()
	if s.Health != nil {
		for _, dh := range s.Health.Devices {
			if dh.State != "normal" && dh.Reason != "" {
				fmt.Fprintf(w, "  %s %s since %s: %s\n", Cell(dh.Name), dh.State, dh.Since.UTC().Format(time.TimeOnly), Cell(dh.Reason))
			}
			if hd := dh.Hold; hd != nil && hd.Held {
				fmt.Fprintf(w, "  %s levels %d-4 held to %s since %s: %s\n", Cell(dh.Name), hd.FromLevel, holdCaps(hd),
					hd.Since.UTC().Format(time.TimeOnly), Cell(hd.Reason))
			}
		}
	}
}

// workloadNotes are what status says under the table about wl: tasks in
// D state, a wrong label, the per-level mechanisms' values in force on the
// disks it used, a failure to apply.
func workloadNotes(wl *snapshot.Workload) []string {
	var notes []string
	if wl.DTasks > 0 {
		notes = append(notes, fmt.Sprintf("%s: %d tasks in D state (waiting on I/O)", Cell(wl.Name), wl.DTasks))
	}
	if wl.LabelError != "" {
		notes = append(notes, fmt.Sprintf("%s: label: %s", Cell(wl.Name), Cell(wl.LabelError)))
	}
	for _, a := range wl.Applied {
		if a.Knobs != "" && a.Used {
			notes = append(notes, fmt.Sprintf("%s: on %s: %s", Cell(wl.Name), Cell(a.Device), Cell(a.Knobs)))
		}
		if a.Error != "" {
			notes = append(notes, fmt.Sprintf("%s: %s on %s: %s", Cell(wl.Name), Cell(a.Mechanism),
				Cell(a.Device), Cell(a.Error)))
		}
	}
	return notes
}

// deviceHealth is a device's HEALTH cell: its state, and with a burst
// model the balance and the time until it is empty.
func deviceHealth(h *snapshot.Health, dev string) string {
	if h == nil {
		return "-"
	}
	for _, d := range h.Devices {
		if d.Name != dev {
			continue
		}
		out := d.State
		if m := d.Model; m != nil {
			out += fmt.Sprintf(" %.0f%%", 100*m.Balance)
			if m.SecondsToEmpty != nil {
				out += " empty in " + Age(time.Duration(*m.SecondsToEmpty*float64(time.Second)))
			}
		}
		if d.Hold != nil && d.Hold.Held {
			out += " held"
		}
		return out
	}
	return "-"
}

// holdCaps is what a burst hold holds its levels to.
func holdCaps(h *snapshot.BurstHold) string {
	var parts []string
	if h.CapIOPS > 0 {
		parts = append(parts, fmt.Sprintf("%.0f IOPS", h.CapIOPS))
	}
	if h.CapBps > 0 {
		parts = append(parts, Bytes(uint64(h.CapBps))+"/s")
	}
	return strings.Join(parts, " and ")
}

// hostHealth is the host's blocked tasks and the sync-write probe.
func hostHealth(w io.Writer, h *snapshot.Health) {
	if h == nil {
		return
	}
	if h.BlockedTasks != nil {
		fmt.Fprintf(w, "host tasks blocked on I/O (D state): %d\n", *h.BlockedTasks)
	}
	if p := h.Probe; p != nil {
		line := fmt.Sprintf("sync-write probe %s: %d writes, last %.1f ms", Cell(p.Path), p.Count, 1000*p.Last)
		if p.Count > 0 {
			line += fmt.Sprintf(", mean %.1f ms", 1000*p.Sum/float64(p.Count))
		}
		if p.Pending >= 1 {
			line += fmt.Sprintf(", one waiting for %.0f s", p.Pending)
		}
		if p.Errors > 0 {
			line += fmt.Sprintf(", %d failed", p.Errors)
		}
		fmt.Fprintln(w, line)
	}
}
