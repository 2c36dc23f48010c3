package view

// The tables of `ddiskqos stats`.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/stats"
)

// Stats writes one reading of every cgroup of `ddiskqos stats`: as JSON
// (one object per line), or as tables; with watch, headed by the time,
// and the missing values and notes only with the first reading.
func Stats(w io.Writer, ss []*stats.Stats, asJSON, watch, first bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		for _, s := range ss {
			if err := enc.Encode(s); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if watch {
		fmt.Fprintf(tw, "--- %s\n", ss[0].Time.Format("15:04:05.000"))
	}
	for i, s := range ss {
		if i > 0 {
			fmt.Fprintln(tw)
		}
		oneStats(tw, s, !watch || first)
	}
	return tw.Flush()
}

func oneStats(w io.Writer, s *stats.Stats, notes bool) {
	head := Cell(s.Name)
	if s.ID != "" {
		head += "  container " + ShortID(s.ID)
	}
	if s.Cgroup != s.Name {
		head += "  cgroup " + Cell(s.Cgroup)
	}
	fmt.Fprintf(w, "%s  (cgroup v%d)\n", head, s.CgroupVersion)
	if r := s.Rates; r != nil {
		fmt.Fprintf(w, "  RATES\tcpu %.1f%%, throttled %.0f%% of periods;  read %s/s, %.0f ops/s;  write %s/s, %.0f ops/s;  net rx %s/s, tx %s/s;  faults %.0f/s\n",
			r.CPUPercent, r.CPUThrottledPercent,
			rateText(r.ReadBps), r.ReadIOPS, rateText(r.WriteBps), r.WriteIOPS,
			rateText(r.RxBps), rateText(r.TxBps), r.PgFaultsPerSec)
	}
	if c := s.CPU; c != nil {
		line := fmt.Sprintf("used %s (user %s, system %s)", nsText(c.UsageNs), nsText(c.UserNs), nsText(c.SystemNs))
		if t := c.Throttling; t != nil {
			line += fmt.Sprintf(";  throttled %d of %d periods, %s", t.Throttled, t.Periods, nsText(t.ThrottledNs))
		}
		fmt.Fprintf(w, "  CPU\t%s%s\n", line, pressureText(c.Pressure))
	}
	if m := s.Memory; m != nil {
		fmt.Fprintf(w, "  MEMORY\tusage %s, peak %s, limit %s;  cache %s, anon %s;  faults %d (major %d), oom kills %d%s\n",
			Bytes(m.UsageBytes), orNone(m.PeakBytes, Bytes), orNone(m.LimitBytes, Bytes),
			Bytes(m.CacheBytes), Bytes(m.AnonBytes), m.PgFault, m.PgMajFault, m.OOMKills, pressureText(m.Pressure))
	}
	if p := s.Pids; p != nil {
		fmt.Fprintf(w, "  PIDS\t%d, limit %s\n", p.Current, orNone(p.Limit, func(n uint64) string { return strconv.FormatUint(n, 10) }))
	}
	if io := s.IO; io != nil {
		fmt.Fprintf(w, "  IO\t%s%s\n", io.File, pressureText(io.Pressure))
		shown := 0
		for _, d := range io.Devices {
			if d.ReadBytes == 0 && d.WriteBytes == 0 && d.ReadOps == 0 && d.WriteOps == 0 {
				continue // a v1 row of a disk this cgroup never used
			}
			if shown == 0 {
				fmt.Fprintf(w, "\tDEVICE\tREAD\tWRITE\tREAD-OPS\tWRITE-OPS\n")
			}
			shown++
			name := d.Dev
			if d.Name != "" {
				name = d.Name + " " + d.Dev
			}
			if len(d.Lowers) > 0 {
				name += " (over " + strings.Join(d.Lowers, ",") + ")"
			}
			fmt.Fprintf(w, "\t%s\t%s\t%s\t%d\t%d\n", name, Bytes(d.ReadBytes), Bytes(d.WriteBytes), d.ReadOps, d.WriteOps)
		}
		if shown == 0 {
			fmt.Fprintf(w, "\tno I/O counted on any disk\n")
		}
	}
	if l := s.Latency; l != nil {
		statsLatency(w, l)
	}
	if n := s.Net; n != nil {
		var ns string
		switch n.SharedWith {
		case "":
			ns = "a namespace of its own"
		case "pid 1":
			ns = "the host's namespace (pid 1's): the host's interfaces"
		case "reader":
			ns = "the namespace ddiskqos runs in: the host's interfaces, unless ddiskqos runs in a container"
		default:
			ns = "not compared with the host's"
		}
		fmt.Fprintf(w, "  NET\tpid %d, %s (%s)\n", n.Pid, OrDash(n.Netns), ns)
		fmt.Fprintf(w, "\tIFACE\tRX\tRX-PKTS\tTX\tTX-PKTS\tERRORS\tDROPPED\n")
		for _, i := range n.Interfaces {
			fmt.Fprintf(w, "\t%s\t%s\t%d\t%s\t%d\t%d\t%d\n", Cell(i.Name), Bytes(i.RxBytes), i.RxPackets,
				Bytes(i.TxBytes), i.TxPackets, i.RxErrors+i.TxErrors, i.RxDropped+i.TxDropped)
		}
	}
	if notes {
		for _, m := range s.Missing {
			fmt.Fprintf(w, "  missing: %s\n", Cell(m))
		}
		for _, m := range s.Notes {
			fmt.Fprintf(w, "  note: %s\n", Cell(m))
		}
	}
}

// statsLatency is the LATENCY section: per disk the daemon's read and write
// p50/p99 of its last tick and the requests in flight, or why there are
// none.
func statsLatency(w io.Writer, l *stats.Latency) {
	if l.Missing != "" {
		fmt.Fprintf(w, "  LATENCY\t%s\n", Cell(l.Missing))
		return
	}
	fmt.Fprintf(w, "  LATENCY\tthe daemon at %s, its last tick (eBPF)\n", Cell(l.Daemon))
	fmt.Fprintf(w, "\tDEVICE\tREAD-P50\tREAD-P99\tWRITE-P50\tWRITE-P99\tIN-FLIGHT\n")
	for _, d := range l.Devices {
		fmt.Fprintf(w, "\t%s %s\t%s\t%s\t%s\t%s\t%d\n", Cell(d.Device), Cell(d.Dev),
			opLatency(d.Read, d.Read.P50), opLatency(d.Read, d.Read.P99),
			opLatency(d.Write, d.Write.P50), opLatency(d.Write, d.Write.P99), d.Read.InFlight+d.Write.InFlight)
	}
}

// opLatency is one quantile of one direction: "-" when no request of it
// completed in the daemon's last tick.
func opLatency(o snapshot.OpLatency, q float64) string {
	if o.TickRequests == 0 {
		return "-"
	}
	return latencyText(q)
}

// nsText is a duration in nanoseconds, to the millisecond.
func nsText(ns uint64) string {
	return time.Duration(min(ns, 1<<63-1)).Round(time.Millisecond).String()
}

// orNone is "none" for 0, else f(n).
func orNone(n uint64, f func(uint64) string) string {
	if n == 0 {
		return "none"
	}
	return f(n)
}

// pressureText is ", pressure some X% full Y%" from the 10 s averages.
func pressureText(p *stats.Pressure) string {
	if p == nil {
		return ""
	}
	s := fmt.Sprintf(";  pressure some %.2f%%", p.Some.Avg10)
	if p.Full != nil {
		s += fmt.Sprintf(" full %.2f%%", p.Full.Avg10)
	}
	return s + " (avg10), stalled " + time.Duration(min(p.Some.TotalUs, (1<<63-1)/1000)*1000).Round(time.Millisecond).String()
}
