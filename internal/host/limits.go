package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Sysctl is one integer under /proc/sys. A missing file (the feature is not
// built) is Present false, distinct from an error and from zero.
type Sysctl struct {
	Name    string // dotted, e.g. "kernel.pid_max"
	Value   int64
	Present bool
	Err     error
}

// ReadSysctl reads the integer sysctl name ("kernel.pty.max").
func ReadSysctl(r Roots, name string) Sysctl {
	s := Sysctl{Name: name}
	p := r.proc(append([]string{"sys"}, strings.Split(name, ".")...)...)
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return s
	}
	if err != nil {
		s.Err = err
		return s
	}
	defer f.Close()
	s.Value, s.Err = ParseSysctlInt(name, f)
	s.Present = s.Err == nil
	return s
}

// ProcLimits are the resource limits of one process.
type ProcLimits struct {
	PID    int // 0: no such process found
	Limits []Limit
	Err    error
}

// FindProcess returns the lowest pid whose comm is comm ("dockerd"), or 0.
// Processes that end while being read are skipped.
func FindProcess(r Roots, comm string) (int, error) {
	ents, err := os.ReadDir(r.Proc)
	if err != nil {
		return 0, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		b, err := os.ReadFile(r.proc(strconv.Itoa(pid), "comm"))
		if err != nil {
			continue // gone, or not ours to read
		}
		if strings.TrimSpace(string(b)) == comm {
			return pid, nil
		}
	}
	return 0, nil
}

// ReadProcLimits reads /proc/<pid>/limits; pid "self" is this process.
func ReadProcLimits(r Roots, pid string) ([]Limit, error) {
	return cgroupfs.ParseFile(r.proc(pid, "limits"), ParseLimits)
}

// DockerdLimits finds dockerd and reads its limits. PID 0 and no error
// means dockerd is not running (or runs in another pid namespace).
func DockerdLimits(r Roots) ProcLimits {
	pid, err := FindProcess(r, "dockerd")
	if err != nil || pid == 0 {
		return ProcLimits{Err: err}
	}
	ls, err := ReadProcLimits(r, strconv.Itoa(pid))
	return ProcLimits{PID: pid, Limits: ls, Err: err}
}

// Bridge is one Linux bridge and how many ports it has.
type Bridge struct {
	Name  string
	Ports int
}

// BrMaxPorts is the kernel's per-bridge port limit: BR_MAX_PORTS =
// 1 << BR_PORT_BITS, with BR_PORT_BITS 10 (net/bridge/br_private.h).
const BrMaxPorts = 1024

// Bridges lists the Linux bridges (netdevs with a bridge/ directory) and
// their port counts (entries of brif/), sorted by name.
func Bridges(r Roots) ([]Bridge, error) {
	dir := r.sys("class", "net")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list network devices: %w", err)
	}
	var out []Bridge
	for _, e := range ents {
		if !exists(filepath.Join(dir, e.Name(), "bridge")) {
			continue
		}
		ports, err := os.ReadDir(filepath.Join(dir, e.Name(), "brif"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("bridge %s: %w", e.Name(), err)
		}
		out = append(out, Bridge{Name: e.Name(), Ports: len(ports)})
	}
	return out, nil
}
