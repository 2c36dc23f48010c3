// Package stats reads what the kernel counts for one cgroup — a container's
// or any other — across its controllers, cgroup v1 and v2 alike: CPU time
// and throttling, memory and faults, block I/O per device (and PSI on v2),
// pids, and the network interfaces of the namespace its tasks live in. It
// is `ddiskqos stats`, the Red Hat seed's `nsinit stats` for any cgroup.
//
// It only reads. The kernel formats are parsed by internal/cgroupfs (one
// parser per format) and /proc/<pid>/net/dev by prometheus/procfs; the
// network namespace is never entered: a task's /proc/<pid>/net/dev shows the
// interfaces of the namespace that task is in.
//
// A value the kernel does not provide here (a controller not mounted, a
// file of a newer kernel, PSI off) is absent and said so in Stats.Missing:
// never shown as a zero.
package stats

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Target is what to read: a cgroup, and what it is known as.
type Target struct {
	Name   string // as the user named it: a container name, or the cgroup path
	ID     string // the container's id; "" for a plain cgroup
	Cgroup string // path relative to each hierarchy's mount, e.g. /docker/<id>
	Pid    int    // a task in the cgroup (a container's main process); 0: look one up
}

// Stats is one reading of a Target. Sections whose controller is not there
// are nil, and Missing says why.
type Stats struct {
	Name          string    `json:"name"`
	ID            string    `json:"id,omitempty"`
	Cgroup        string    `json:"cgroup"`
	Time          time.Time `json:"time"`
	CgroupVersion int       `json:"cgroup_version"` // 1 (v1 and hybrid hosts) or 2
	CPU           *CPU      `json:"cpu,omitempty"`
	Memory        *Memory   `json:"memory,omitempty"`
	IO            *IO       `json:"io,omitempty"`
	Pids          *Pids     `json:"pids,omitempty"`
	Net           *Net      `json:"net,omitempty"`
	// Rates are set by Rate between two readings (the streaming mode).
	Rates *Rates `json:"rates,omitempty"`
	// Latency is what the running daemon measured of the cgroup's
	// requests, or why nothing (set by LatencyOf; nil: not asked).
	Latency *Latency `json:"latency,omitempty"`
	// Missing lists what could not be read and why ("memory.peak: not
	// available on this kernel"), so that an absent value is never taken
	// for a zero.
	Missing []string `json:"missing,omitempty"`
	// Notes are facts about the numbers that an operator needs to read
	// them right (v1 counting only where blk-throttle is set up).
	Notes []string `json:"notes,omitempty"`
}

// CPU is CPU time and CFS bandwidth throttling.
type CPU struct {
	UsageNs  uint64 `json:"usage_ns"`
	UserNs   uint64 `json:"user_ns"`
	SystemNs uint64 `json:"system_ns"`
	// Throttling is nil when the kernel does not count it here (v2 with
	// the cpu controller not enabled for the cgroup).
	Throttling *Throttling `json:"throttling,omitempty"`
	Pressure   *Pressure   `json:"pressure,omitempty"` // v2 cpu.pressure
}

// Throttling counts CFS bandwidth periods (cpu.cfs_quota_us, v2 cpu.max).
type Throttling struct {
	Periods     uint64 `json:"nr_periods"`
	Throttled   uint64 `json:"nr_throttled"`
	ThrottledNs uint64 `json:"throttled_ns"`
}

// Memory is the memory charged to the cgroup.
type Memory struct {
	UsageBytes uint64 `json:"usage_bytes"`
	// PeakBytes is the high-water mark (v1 max_usage_in_bytes, v2
	// memory.peak since 5.19); 0 when the kernel has none.
	PeakBytes uint64 `json:"peak_bytes,omitempty"`
	// LimitBytes is the hard limit, 0 when there is none.
	LimitBytes uint64    `json:"limit_bytes,omitempty"`
	CacheBytes uint64    `json:"cache_bytes"` // page cache: v1 total_cache, v2 file
	AnonBytes  uint64    `json:"anon_bytes"`  // v1 total_rss, v2 anon
	PgFault    uint64    `json:"pgfault"`
	PgMajFault uint64    `json:"pgmajfault"`
	OOMKills   uint64    `json:"oom_kills"`
	Pressure   *Pressure `json:"pressure,omitempty"` // v2 memory.pressure
}

// IO is block I/O per device, from the counters the daemon reads.
type IO struct {
	File     string    `json:"file"` // the counters file: io.stat, blkio.throttle.io_service_bytes_recursive, ...
	Devices  []Device  `json:"devices"`
	Pressure *Pressure `json:"pressure,omitempty"` // v2 io.pressure
}

// Device is one block device's counters.
type Device struct {
	Dev        string `json:"dev"`            // MAJ:MIN
	Name       string `json:"name,omitempty"` // e.g. loop3, vda; "" when sysfs does not know it
	ReadBytes  uint64 `json:"read_bytes"`
	WriteBytes uint64 `json:"write_bytes"`
	ReadOps    uint64 `json:"read_ops"`
	WriteOps   uint64 `json:"write_ops"`
	// Lowers are the disks below a stacked device (a loop device's backing
	// file's disk, a dm or md device's slaves), as MAJ:MIN: the kernel
	// charges the I/O of the stacked device to the cgroup again on them.
	Lowers []string `json:"lowers,omitempty"`
}

// Pids is the number of tasks and its limit.
type Pids struct {
	Current uint64 `json:"current"`
	Limit   uint64 `json:"limit,omitempty"` // 0: no limit
}

// Net is the interfaces of the network namespace a task of the cgroup is in.
type Net struct {
	Pid   int    `json:"pid"`   // the task whose /proc/<pid>/net/dev was read
	Netns string `json:"netns"` // its namespace, as /proc/<pid>/ns/net names it
	// SharedWith says whose namespace that is as well, when it is not one
	// of the cgroup's own: "pid 1" (the host's interfaces, when procfs is
	// the host's) or "reader" (the namespace ddiskqos itself runs in, the
	// host's unless it runs in a container). "" when it is neither's, or
	// "unknown" when neither could be compared (ns links need ptrace
	// access).
	SharedWith string      `json:"shared_with,omitempty"`
	Interfaces []Interface `json:"interfaces"` // by name
}

// Interface is one network interface's counters.
type Interface struct {
	Name      string `json:"name"`
	RxBytes   uint64 `json:"rx_bytes"`
	RxPackets uint64 `json:"rx_packets"`
	RxErrors  uint64 `json:"rx_errors"`
	RxDropped uint64 `json:"rx_dropped"`
	TxBytes   uint64 `json:"tx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxErrors  uint64 `json:"tx_errors"`
	TxDropped uint64 `json:"tx_dropped"`
}

// Pressure is a PSI file: the share of wall time some (or all non-idle)
// tasks stalled on the resource.
type Pressure struct {
	Some PSI  `json:"some"`
	Full *PSI `json:"full,omitempty"`
}

// PSI is one line of a pressure file.
type PSI struct {
	Avg10   float64 `json:"avg10"` // percent
	Avg60   float64 `json:"avg60"`
	Avg300  float64 `json:"avg300"`
	TotalUs uint64  `json:"total_us"`
}

func pressureOf(p cgroupfs.Pressure) *Pressure {
	out := &Pressure{Some: PSI{p.Some.Avg10, p.Some.Avg60, p.Some.Avg300, p.Some.Total}}
	if p.HasFull {
		out.Full = &PSI{p.Full.Avg10, p.Full.Avg60, p.Full.Avg300, p.Full.Total}
	}
	return out
}

// ErrNoCgroup means the cgroup exists in none of the hierarchies read.
var ErrNoCgroup = errors.New("no such cgroup")

// Reader reads Stats. Its filesystem roots are values, so tests can point
// it at a tree in a temporary directory.
type Reader struct {
	Layout cgroupfs.Layout
	ProcFS string // "" means /proc
	SysFS  string // "" means /sys

	devNames map[cgroupfs.Dev]string
	lowers   map[string][]string // host.Lowers, once
}

func (r *Reader) procfs() string { return cmpOr(r.ProcFS, "/proc") }
func (r *Reader) sysfs() string  { return cmpOr(r.SysFS, "/sys") }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Version is the cgroup version the reader reads: that of the I/O
// hierarchy (1 on v1 and hybrid hosts, 2 on unified ones).
func (r *Reader) Version() int {
	if h, err := r.Layout.IOHierarchy(); err == nil {
		return h.Version
	}
	if r.Layout.Unified != "" {
		return 2
	}
	return 1
}

// dir returns the directory of rel in the hierarchy of controller ctl, and
// whether that directory exists. where names the hierarchy for messages.
func (r *Reader) dir(ctl, rel string) (dir, where string, ok bool) {
	var mount string
	if r.Version() == 2 {
		mount, where = r.Layout.Unified, "cgroup2 "+r.Layout.Unified
	} else {
		m, found := r.Layout.V1Controller(ctl)
		if !found {
			return "", "the " + ctl + " hierarchy (not mounted)", false
		}
		mount, where = m.Mountpoint, ctl+" hierarchy "+m.Mountpoint
	}
	p, err := cgroupfs.Hierarchy{Version: r.Version(), Mount: mount}.Path(rel)
	if err != nil {
		return "", where, false
	}
	st, err := os.Stat(p)
	return p, where, err == nil && st.IsDir()
}

// controllers are the hierarchies a reading looks at, in its order.
var controllers = []string{"cpu", "cpuacct", "memory", "blkio", "pids"}

// Read takes one reading of t. It fails, wrapping ErrNoCgroup and naming
// the cgroup, when the cgroup is in none of the hierarchies; anything less
// (a controller not mounted, a file missing) is listed in Stats.Missing.
func (r *Reader) Read(t Target) (*Stats, error) {
	s := &Stats{Name: t.Name, ID: t.ID, Cgroup: filepath.Clean("/" + t.Cgroup), Time: time.Now(), CgroupVersion: r.Version()}
	found := false
	var looked []string
	for _, c := range controllers {
		_, where, ok := r.dir(c, t.Cgroup)
		found = found || ok
		if !slices.Contains(looked, where) {
			looked = append(looked, where)
		}
	}
	if !found {
		return nil, fmt.Errorf("cgroup %s: %w (looked in %s)", s.Cgroup, ErrNoCgroup, strings.Join(looked, ", "))
	}
	r.readCPU(s, t.Cgroup)
	r.readMemory(s, t.Cgroup)
	r.readIO(s, t.Cgroup)
	r.readPids(s, t.Cgroup)
	r.readNet(s, t)
	return s, nil
}

// missing records why a value is absent.
func (s *Stats) missing(format string, a ...any) {
	s.Missing = append(s.Missing, fmt.Sprintf(format, a...))
}

// errNotThere means a file the kernel may not provide is absent.
var errNotThere = errors.New("not available on this kernel or cgroup")

func readFile(dir, name string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", name, errNotThere)
	}
	return data, err
}

func readFlat(dir, name string) (cgroupfs.FlatKeyed, error) {
	data, err := readFile(dir, name)
	if err != nil {
		return nil, err
	}
	return cgroupfs.ParseFlatKeyed(data, name)
}

func readSingle(dir, name string) (v uint64, unlimited bool, err error) {
	data, err := readFile(dir, name)
	if err != nil {
		return 0, false, err
	}
	return cgroupfs.ParseSingleValue(data, name)
}

func readPressure(dir, name string) (*Pressure, error) {
	p, err := cgroupfs.ReadHostPressure(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	return pressureOf(p), nil
}

func (r *Reader) readPids(s *Stats, rel string) {
	dir, where, ok := r.dir("pids", rel)
	if !ok {
		s.missing("pids: cgroup not in %s", where)
		return
	}
	cur, _, err := readSingle(dir, "pids.current")
	if err != nil {
		s.missing("pids: %v", err)
		return
	}
	p := &Pids{Current: cur}
	if l, unl, err := readSingle(dir, "pids.max"); err == nil && !unl {
		p.Limit = l
	} else if err != nil {
		s.missing("pids limit: %v", err)
	}
	s.Pids = p
}

// CgroupPath turns what a user typed into a cgroup path relative to the
// hierarchies' mounts: a cgroup path as /proc/PID/cgroup shows it
// (/docker/<id>) is kept; the directory of a cgroup under any mounted
// hierarchy (/sys/fs/cgroup/blkio/docker/<id>, /sys/fs/cgroup/x on v2) is
// made relative to that mount.
func (r *Reader) CgroupPath(p string) string {
	clean := filepath.Clean("/" + p)
	mounts := []string{r.Layout.Unified}
	for _, m := range r.Layout.V1 {
		mounts = append(mounts, m.Mountpoint)
	}
	best := ""
	for _, m := range mounts {
		if m == "" {
			continue
		}
		m = filepath.Clean(m)
		if (clean == m || strings.HasPrefix(clean, m+"/")) && len(m) > len(best) {
			best = m
		}
	}
	if best == "" {
		return clean
	}
	return "/" + strings.TrimPrefix(strings.TrimPrefix(clean, best), "/")
}
