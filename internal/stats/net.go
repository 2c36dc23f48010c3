package stats

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
)

// readNet reads the interfaces of the namespace a task of the cgroup is in.
func (r *Reader) readNet(s *Stats, t Target) {
	pid := t.Pid
	if pid <= 0 || !r.pidIn(pid) {
		pid = r.findTask(t.Cgroup)
	}
	if pid <= 0 {
		s.missing("net: no task in cgroup %s to read the network namespace of", s.Cgroup)
		return
	}
	fsys, err := procfs.NewFS(r.procfs())
	if err != nil {
		s.missing("net: %v", err)
		return
	}
	p, err := fsys.Proc(pid)
	if err != nil {
		s.missing("net: pid %d: %v", pid, err)
		return
	}
	nd, err := p.NetDev()
	if err != nil {
		s.missing("net: %v", err)
		return
	}
	n := &Net{Pid: pid}
	n.Netns, n.SharedWith = r.netns(pid)
	for _, l := range nd {
		n.Interfaces = append(n.Interfaces, Interface{Name: l.Name,
			RxBytes: l.RxBytes, RxPackets: l.RxPackets, RxErrors: l.RxErrors, RxDropped: l.RxDropped,
			TxBytes: l.TxBytes, TxPackets: l.TxPackets, TxErrors: l.TxErrors, TxDropped: l.TxDropped})
	}
	slices.SortFunc(n.Interfaces, func(a, b Interface) int { return strings.Compare(a.Name, b.Name) })
	s.Net = n
}

// netns names pid's network namespace and whom it shares it with (see
// Net.SharedWith).
func (r *Reader) netns(pid int) (ns, shared string) {
	link := func(p string) string {
		l, _ := os.Readlink(filepath.Join(r.procfs(), p, "ns", "net"))
		return l
	}
	ns = link(strconv.Itoa(pid))
	if ns == "" {
		return "", "unknown"
	}
	compared := false
	for _, o := range []struct{ proc, who string }{{"1", "pid 1"}, {"self", "reader"}} {
		if l := link(o.proc); l != "" {
			compared = true
			if l == ns {
				return ns, o.who
			}
		}
	}
	if !compared {
		return ns, "unknown"
	}
	return ns, ""
}

// pidIn reports whether pid still exists (a container's main process that
// ended while the reading was taken is replaced by another task).
func (r *Reader) pidIn(pid int) bool {
	_, err := os.Stat(filepath.Join(r.procfs(), strconv.Itoa(pid)))
	return err == nil
}

// findTask returns a task of the cgroup or of a cgroup below it, 0 if none.
func (r *Reader) findTask(rel string) int {
	for _, c := range []string{"pids", "cpu", "memory", "blkio"} {
		dir, _, ok := r.dir(c, rel)
		if !ok {
			continue
		}
		pid := 0
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() || pid > 0 {
				return nil
			}
			data, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(data)) {
				if n, err := strconv.Atoi(f); err == nil && n > 0 {
					pid = n
					return filepath.SkipAll
				}
			}
			return nil
		})
		if pid > 0 {
			return pid
		}
	}
	return 0
}
