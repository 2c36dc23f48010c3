package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ddiskqos/ddiskqos/internal/actuate/mech"
	"github.com/ddiskqos/ddiskqos/internal/api"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// daemonFlags are the flags of the commands that ask the running daemon
// (status, top): where its API is and how long to wait for an answer.
type daemonFlags struct {
	addr    string
	timeout time.Duration
}

func (d *daemonFlags) declare(f *cli.FlagSet, timeoutUsage string) {
	f.StringVar(&d.addr, "addr", api.DefaultAddr, "HOST:PORT", "the daemon's API: HOST:PORT or an http:// URL (what \"ddiskqos run --listen\" was given)")
	f.DurationVar(&d.timeout, "timeout", 10*time.Second, "DUR", timeoutUsage)
}

// client checks the flags and returns the daemon's API client, or the
// usage error.
func (d *daemonFlags) client() (*api.Client, error) {
	if d.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: want a positive duration", d.timeout)
	}
	c, err := api.NewClient(d.addr)
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %v", d.addr, err)
	}
	return c, nil
}

// statusOptions are the flags of "ddiskqos status".
type statusOptions struct {
	daemonFlags
	level, name, sort string
	json              bool
}

// statusSorts are the --sort keys.
var statusSorts = []string{"name", "level", "rate"}

var statusCmd = &cli.Cmd[statusOptions]{
	Info: cli.Info{
		Name:    "status",
		Summary: "what the running daemon decided, per workload",
		Description: `Asks the running daemon ("ddiskqos run") for the state of its last tick and
prints every workload it manages, the level the feedback queue put it in and
what that means on each disk, then the disks.

Every container starts at level 1, the best served. Each level allows a
number of bytes (its allowance); a container that moves more is demoted one
level, down to level 4, where bulk streams share what is left. Quiet
containers climb back up. A label can pin a container to a level or exempt
it from QoS.

A "DEGRADED:" line under the first line names each reason the daemon is
not fully working (why its /healthz answers 503): a loop that stopped
ticking, a state file it cannot save (no new knob is written meanwhile),
a workload source that lost its backend (the Docker engine: containers
are neither discovered nor released until it is back).`,
		More: `Columns:
  NAME, ID       the container (ID cut to 12 characters)
  LEVEL          1 (best served) .. 4; "pinned" when a label fixes it,
                 "exempt" when QoS leaves it alone, "!label" when its label
                 is wrong (see the notes below the table)
  WEIGHT         the I/O weight (10..1000) its level maps to; on disks that
                 only take limits (throttle mechanism): the limit in force
                 now, or "unlimited"
  IN-LEVEL       bytes moved since it entered its level / the level's
                 allowance ("-": no allowance, the last level)
  READ/s WRITE/s over the last tick
  PRESSURE       share of the last 10 s its tasks stalled on I/O (PSI
                 "some" avg10; cgroup v2 only)
  MECHANISM      per disk, how the level is applied: bfq-weight,
                 iocost-weight, cfq-weight (a share of the disk) or throttle
                 (a limit); "!" marks a failure to apply (see the notes)
  HEALTH         per disk, from its own counters: normal, draining
                 (spending burst credit), exhausted (a steady floor while
                 busy: burst credit exhausted?) or recovering; with a burst
                 model (health.models) the balance and the time until empty`,
		Examples: `  ddiskqos status
  ddiskqos status --sort rate              # the heaviest I/O first
  ddiskqos status --level 4                # who is in the bulk level
  ddiskqos status --json | jq '.workloads[] | {name, level, bytes_in_level}'`,
		Exit: `  0  printed
  1  the daemon is not reachable, not ready or answered an error
  2  usage error`,
	},
	Flags: func(o *statusOptions, f *cli.FlagSet) {
		o.declare(f, "give up on the daemon after this long")
		f.BoolVar(&o.json, "json", "print the daemon's JSON snapshot unchanged (a stable schema) instead of tables")
		f.StringVar(&o.level, "level", "", "N", "show only workloads at this level: 1..4, or 0 for exempt", cli.Values("1", "2", "3", "4", "0"))
		f.StringVar(&o.name, "name", "", "SUBSTR", "show only workloads whose name contains SUBSTR")
		f.StringVar(&o.sort, "sort", "name", "name|level|rate", "order of the workloads: name, level (best served first, exempt last), or rate (most I/O first)")
	},
}

// runStatus is `ddiskqos status`.
func runStatus(args []string, stdout, stderr io.Writer) int {
	return statusMain(args, stdout, stderr, time.Now)
}

// statusMain is runStatus with the clock the tick age is measured against.
func statusMain(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	o, _, code, ok := statusCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	bad := func(format string, a ...any) int { return cli.Usagef(stderr, "ddiskqos status", format, a...) }
	if !slices.Contains(statusSorts, o.sort) {
		return bad("--sort %q: want one of %s", o.sort, strings.Join(statusSorts, ", "))
	}
	if o.level != "" {
		if n, err := strconv.Atoi(o.level); err != nil || n < 0 || n > 4 {
			return bad("--level %q: want 1..4, or 0 for exempt", o.level)
		}
	}
	client, err := o.client()
	if err != nil {
		return bad("%v", err)
	}

	q := url.Values{}
	if o.level != "" {
		q.Set("level", o.level)
	}
	if o.name != "" {
		q.Set("name", o.name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	body, err := client.WorkloadsJSON(ctx, q)
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos status: %v\n", statusExplain(err, o.addr))
		return 1
	}
	if o.json {
		if _, err := stdout.Write(body); err != nil {
			fmt.Fprintf(stderr, "ddiskqos status: %v\n", err)
			return 1
		}
		return 0
	}
	var snap snapshot.Snapshot
	if err := json.Unmarshal(body, &snap); err != nil {
		fmt.Fprintf(stderr, "ddiskqos status: the answer of %s is not a ddiskqos snapshot: %v\n", o.addr, err)
		return 1
	}
	filters := statusFilterText(o.level, o.name)
	writeStatus(stdout, &snap, statusOrder(snap.Workloads, o.sort), o.addr, filters, now())
	return 0
}

// statusExplain turns a fetch error into what an operator does next.
func statusExplain(err error, addr string) string {
	var he *api.HTTPError
	if errors.As(err, &he) {
		// The body is the daemon's (or whatever listens there): escaped
		// like every cell before it reaches the terminal.
		e := &api.HTTPError{Code: he.Code, Msg: statusCell(he.Msg)}
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

func statusFilterText(level, name string) string {
	var f []string
	if level != "" {
		f = append(f, "--level "+level)
	}
	if name != "" {
		f = append(f, "--name "+strconv.Quote(name))
	}
	return strings.Join(f, " ")
}

// statusOrder returns the workloads in the order asked for; ties fall back
// to name, then ID, so the order never depends on the daemon's.
func statusOrder(ws []*snapshot.Workload, by string) []*snapshot.Workload {
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

// writeStatus prints the header, the workloads table, notes and devices.
func writeStatus(w io.Writer, s *snapshot.Snapshot, ws []*snapshot.Workload, addr, filters string, now time.Time) {
	dry := "no"
	if s.DryRun {
		dry = "yes (nothing is written)"
	}
	fmt.Fprintf(w, "ddiskqos at %s: tick %d, %s ago (every %s, took %s)\n",
		addr, s.Tick, statusAge(now.Sub(s.At)), s.Interval, s.TickDuration.Round(10*time.Microsecond))
	// What makes /healthz answer 503, plainly, before anything else.
	for _, reason := range api.Degraded(s, now) {
		fmt.Fprintf(w, "DEGRADED: %s\n", statusCell(reason))
	}
	fmt.Fprintf(w, "source %s, actuator %s, cgroup %s, dry-run %s\n",
		orDash(s.Source), orDash(s.Actuator), orDash(s.CgroupMode), dry)
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
			parts[i] = fmt.Sprintf("%s %d", statusCell(e.Cause), e.Count)
		}
		fmt.Fprintf(w, "errors since start: %s (see the daemon's log)\n", strings.Join(parts, ", "))
	}
	if p := s.HostPressure; p != nil {
		fmt.Fprintf(w, "host I/O pressure (avg10): some %.2f%%, full %.2f%%\n", p.SomeAvg10, p.FullAvg10)
	}
	writeHostHealth(w, s.Health)

	fmt.Fprintln(w)
	if filters != "" {
		fmt.Fprintf(w, "showing %d of %d workloads (%s)\n", len(ws), total, filters)
	}
	var notes []string
	if len(ws) == 0 {
		fmt.Fprintln(w, "no workloads")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tID\tLEVEL\tWEIGHT\tIN-LEVEL\tREAD/s\tWRITE/s\tPRESSURE\tMECHANISM")
		for _, wl := range ws {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
				statusCell(wl.Name), statusCell(shortID(wl.ID)), statusLevel(wl), statusWeight(wl), statusInLevel(wl),
				humanBytes(rate(wl.ReadBps)), humanBytes(rate(wl.WriteBps)), statusPressure(wl.Pressure), statusMechanisms(wl.Applied, !statusThrottleOnly(wl)))
			if wl.DTasks > 0 {
				notes = append(notes, fmt.Sprintf("%s: %d tasks in D state (waiting on I/O)", statusCell(wl.Name), wl.DTasks))
			}
			if wl.LabelError != "" {
				notes = append(notes, fmt.Sprintf("%s: label: %s", statusCell(wl.Name), statusCell(wl.LabelError)))
			}
			for _, a := range wl.Applied {
				if a.Error != "" {
					notes = append(notes, fmt.Sprintf("%s: %s on %s: %s", statusCell(wl.Name), statusCell(a.Mechanism),
						statusCell(a.Device), statusCell(a.Error)))
				}
			}
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
			statusCell(d.Name), orDash(d.Dev), orDash(d.Scheduler), orDash(d.Mechanism), eff, top,
			humanBytes(rate(d.ReadBps)), humanBytes(rate(d.WriteBps)), statusHealth(s.Health, d.Name))
	}
	tw.Flush()
	if s.Health != nil {
		for _, dh := range s.Health.Devices {
			if dh.State != "normal" && dh.Reason != "" {
				fmt.Fprintf(w, "  %s %s since %s: %s\n", statusCell(dh.Name), dh.State, dh.Since.UTC().Format(time.TimeOnly), statusCell(dh.Reason))
			}
			if hd := dh.Hold; hd != nil && hd.Held {
				fmt.Fprintf(w, "  %s levels %d-4 held to %s since %s: %s\n", statusCell(dh.Name), hd.FromLevel, holdCaps(hd),
					hd.Since.UTC().Format(time.TimeOnly), statusCell(hd.Reason))
			}
		}
	}
}

// statusHealth is a device's HEALTH cell: its state, and with a burst
// model the balance and the time until it is empty.
func statusHealth(h *snapshot.Health, dev string) string {
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
				out += " empty in " + statusAge(time.Duration(*m.SecondsToEmpty*float64(time.Second)))
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
		parts = append(parts, humanBytes(uint64(h.CapBps))+"/s")
	}
	return strings.Join(parts, " and ")
}

// writeHostHealth is the host's blocked tasks and the sync-write probe.
func writeHostHealth(w io.Writer, h *snapshot.Health) {
	if h == nil {
		return
	}
	if h.BlockedTasks != nil {
		fmt.Fprintf(w, "host tasks blocked on I/O (D state): %d\n", *h.BlockedTasks)
	}
	if p := h.Probe; p != nil {
		line := fmt.Sprintf("sync-write probe %s: %d writes, last %.1f ms", statusCell(p.Path), p.Count, 1000*p.Last)
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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return statusCell(s)
}

// statusCell makes a string from the daemon safe to print in a table on
// a terminal: a name is whatever the cgroup directory or the container was
// called, and may carry terminal escapes (ESC ]0;title BEL retitles the
// window, CSI sequences move the cursor or clear the screen), tabs and
// newlines that would break the table, bidi overrides that reorder what is
// shown, or bytes that are not UTF-8. Every rune that is not printable
// (unicode.IsPrint; the ASCII space is kept) is shown as a Go escape:
// \t \n \r, \xNN for other ASCII controls and for bytes that are not
// UTF-8, \uNNNN or \UNNNNNNNN for the rest (C1 controls, U+202E, ...).
// Backslashes stay as they are (systemd names carry \x2d): the table is
// for reading; --json passes the daemon's JSON through unchanged.
func statusCell(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == ' ' || unicode.IsPrint(r):
			b.WriteString(s[:size])
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			fmt.Fprintf(&b, `\U%08x`, r)
		}
		s = s[size:]
	}
	return b.String()
}

// shortID is the first 12 characters of id (a Docker ID's short form),
// escaped like every cell.
func shortID(id string) string {
	if utf8.RuneCountInString(id) > 12 {
		n := 0
		for i := range id {
			if n == 12 {
				id = id[:i]
				break
			}
			n++
		}
	}
	return orDash(id)
}

func statusLevel(w *snapshot.Workload) string {
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

// statusThrottleOnly: every disk of w takes only limits, no weights.
func statusThrottleOnly(w *snapshot.Workload) bool {
	for _, a := range w.Applied {
		if mech.HasWeight(a.Mechanism) {
			return false
		}
	}
	return len(w.Applied) > 0
}

// statusWeight is the weight, or for a workload every disk of which takes
// only limits, the limit in force.
func statusWeight(w *snapshot.Workload) string {
	if w.Exempt {
		return "-"
	}
	if !statusThrottleOnly(w) {
		return strconv.Itoa(w.Weight)
	}
	var limits []string
	for _, a := range w.Applied {
		l := statusLimit(a)
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

// statusLimit is the throttle limit in force on one device, "" when none:
// 10MiB/s (read and write alike), r10MiB/s, w5MiB/s or r10MiB/s,w5MiB/s.
func statusLimit(a snapshot.Applied) string {
	if !a.Throttled || (a.ReadBps == 0 && a.WriteBps == 0) {
		return ""
	}
	switch {
	case a.ReadBps == a.WriteBps:
		return humanBytes(a.ReadBps) + "/s"
	case a.WriteBps == 0:
		return "r" + humanBytes(a.ReadBps) + "/s"
	case a.ReadBps == 0:
		return "w" + humanBytes(a.WriteBps) + "/s"
	default:
		return "r" + humanBytes(a.ReadBps) + "/s,w" + humanBytes(a.WriteBps) + "/s"
	}
}

func statusInLevel(w *snapshot.Workload) string {
	if w.Exempt {
		return "-"
	}
	allow := "-"
	if w.Allowance > 0 {
		allow = humanBytes(w.Allowance)
	}
	return humanBytes(w.BytesInLevel) + "/" + allow
}

func statusPressure(p *snapshot.Pressure) string {
	if p == nil {
		return "-"
	}
	return strconv.FormatFloat(p.SomeAvg10, 'f', 1, 64) + "%"
}

// statusMechanisms is "dev:mechanism" per disk, with the limit in force
// on a throttled disk when the WEIGHT column shows a weight; past three
// disks, the mechanisms with their disk counts.
func statusMechanisms(applied []snapshot.Applied, weightShown bool) string {
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
			p := statusCell(a.Device) + ":" + statusCell(a.Mechanism)
			if l := statusLimit(a); l != "" && weightShown {
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
		p := fmt.Sprintf("%s(%d)", statusCell(g.mech), g.n)
		if g.anyFailed {
			p += "!"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}

func rate(bps float64) uint64 {
	if bps <= 0 || math.IsNaN(bps) {
		return 0
	}
	if bps >= math.MaxUint64 {
		return math.MaxUint64
	}
	return uint64(math.Round(bps))
}

// humanBytes is n in IEC units, one decimal below 100: 0, 512B, 1.5KiB,
// 8MiB, 120MiB.
func humanBytes(n uint64) string {
	if n == 0 {
		return "0"
	}
	if n < 1024 {
		return strconv.FormatUint(n, 10) + "B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	var s string
	if v >= 100 {
		s = strconv.FormatFloat(v, 'f', 0, 64)
	} else {
		s = strconv.FormatFloat(v, 'f', 1, 64)
		s = strings.TrimSuffix(s, ".0")
	}
	return s + units[u]
}

// statusAge is a tick's age, to 0.1 s under a minute.
func statusAge(d time.Duration) string {
	if d < 0 {
		return "0s (clock behind the daemon's)"
	}
	if d < time.Minute {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
