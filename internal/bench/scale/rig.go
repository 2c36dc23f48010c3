package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/loopdev"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// parentPrefix names the bench's parent cgroups; a leftover of a killed run
// is recognised (and removed) by it and the pid that follows.
const parentPrefix = "ddiskqos-bench-scale-"

// rig is what the bench creates: a parent cgroup with N children, a loop
// device over a file of its own, and the load processes. teardown removes
// all of it, whatever was reached.
type rig struct {
	h       cgroupfs.Hierarchy
	parent  string // relative to the hierarchy, e.g. /ddiskqos-bench-scale-4711
	dir     string // parent's directory
	scratch string // directory of the loop's backing file
	loop    string // /dev/loopN, "" when not attached
	ld      *loopdev.Device
	loads   []*workload.Proc
	cancel  context.CancelFunc // kills the loads
}

// newRig makes the parent cgroup (v2: with the io controller enabled for
// its children).
func newRig(h cgroupfs.Hierarchy) (*rig, error) {
	r := &rig{h: h, parent: "/" + parentPrefix + strconv.Itoa(os.Getpid())}
	var err error
	if r.dir, err = h.Path(r.parent); err != nil {
		return nil, err
	}
	removeStale(h.Mount)
	if err := os.Mkdir(r.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create parent cgroup: %w", err)
	}
	if h.Version == 2 {
		ctl := filepath.Join(r.dir, "cgroup.subtree_control")
		if err := os.WriteFile(ctl, []byte("+io"), 0); err != nil {
			os.Remove(r.dir)
			return nil, fmt.Errorf("enable io for the children: write +io to %s: %w (is io in %s/cgroup.subtree_control?)", ctl, err, h.Mount)
		}
	}
	return r, nil
}

// removeStale removes the cgroups a bench killed with SIGKILL left behind
// (their pid is gone). Best effort.
func removeStale(mount string) {
	ents, _ := os.ReadDir(mount)
	for _, e := range ents {
		pid, ok := strings.CutPrefix(e.Name(), parentPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		if n, err := strconv.Atoi(pid); err == nil && syscall.Kill(n, 0) == nil {
			continue // still running
		}
		cgroupfs.RemoveTree(filepath.Join(mount, e.Name()))
	}
}

// child returns the relative path of child i of the parent.
func (r *rig) child(name string) string { return r.parent + "/" + name }

// mkChildren makes the named child cgroups.
func (r *rig) mkChildren(names []string) error {
	for _, n := range names {
		if err := os.Mkdir(filepath.Join(r.dir, n), 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", n, err)
		}
	}
	return nil
}

// rmChildren removes the named (empty) child cgroups.
func (r *rig) rmChildren(names []string) error {
	for _, n := range names {
		if err := os.Remove(filepath.Join(r.dir, n)); err != nil {
			return fmt.Errorf("remove cgroup %s: %w", n, err)
		}
	}
	return nil
}

// attachLoop creates a file of sizeMiB under dir and attaches a loop
// device over it with direct I/O (the readers compete for the real disk,
// not the page cache).
func (r *rig) attachLoop(dir string, sizeMiB int) error {
	var err error
	if r.scratch, err = os.MkdirTemp(dir, "ddiskqos-bench-scale-"); err != nil {
		return fmt.Errorf("loop backing directory: %w", err)
	}
	file := filepath.Join(r.scratch, "disk.img")
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("loop backing file: %w", err)
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i*7 + 1) // real blocks, not holes
	}
	for range sizeMiB {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return fmt.Errorf("fill %s: %w", file, err)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", file, err)
	}
	// A brand-new loop device (loopdev). tmpfs (the test VM's /tmp) has
	// no O_DIRECT: a buffered device still gives the readers' cgroups real
	// counters.
	ld, err := loopdev.Attach(file, true)
	if err != nil {
		return err
	}
	r.ld, r.loop = ld, ld.Path
	return nil
}

// startLoads starts one reader per named cgroup: O_DIRECT reads of the
// loop device, 64 KiB at a time, capped at rate bytes/s, looping, until
// teardown, each in a region of its own. The readers run outside this
// process, so getrusage(RUSAGE_SELF) of the bench (the daemon) does not
// count them. On cgroup v1 they are the threads of one workload process
// (--threads-from: each thread joins its own cgroup), so that a thousand
// readers cost a thousand sleeping threads, not a thousand Go runtimes
// that two cores cannot even start in minutes; on v2, whose cgroups hold
// whole processes, one process per reader.
func (r *rig) startLoads(ctx context.Context, exe string, prefix, env []string, names []string, rate int64, sizeMiB int) error {
	ctx, r.cancel = context.WithCancel(ctx)
	span := int64(sizeMiB) << 20 / int64(max(1, len(names)))
	span = max(1<<20, span&^(1<<20-1))
	args := func(extra ...string) []string {
		a := append(append([]string(nil), prefix...), "--wait-stdin", "--json", "--direct", "--loop",
			"--bs", "64k", "--rate", strconv.FormatInt(rate, 10), "--span", strconv.FormatInt(span, 10))
		return append(append(a, extra...), "read", r.loop)
	}
	if r.h.Version == 1 {
		var list strings.Builder
		for _, n := range names {
			tasks, err := r.h.Path(r.child(n) + "/tasks")
			if err != nil {
				return err
			}
			list.WriteString(tasks + "\n")
		}
		file := filepath.Join(r.scratch, "readers.tasks")
		if err := os.WriteFile(file, []byte(list.String()), 0o644); err != nil {
			return fmt.Errorf("list of the readers' cgroups: %w", err)
		}
		return r.startLoad(ctx, exe, env, args("--threads-from", file), "")
	}
	for i, n := range names {
		off := (int64(i) * span) % (int64(sizeMiB) << 20)
		if off+span > int64(sizeMiB)<<20 {
			off = 0
		}
		if err := r.startLoad(ctx, exe, env, args("--offset", strconv.FormatInt(off, 10)), r.child(n)); err != nil {
			return err
		}
	}
	return nil
}

// startLoad starts one workload process, puts it into cgroup (unless ""),
// and lets it go.
func (r *rig) startLoad(ctx context.Context, exe string, env, args []string, cgroup string) error {
	var place func(int) error
	if cgroup != "" {
		place = func(pid int) error { return r.h.AddProcess(cgroup, pid) }
	}
	p, err := workload.StartIn(ctx, exe, env, args, place)
	if err != nil {
		return err
	}
	r.loads = append(r.loads, p)
	return nil
}

// teardown stops the loads, removes every cgroup, detaches the loop device
// and removes its file. It reports everything it could not undo.
func (r *rig) teardown() error {
	var errs []error
	for _, p := range r.loads {
		p.Stop()
	}
	for _, p := range r.loads {
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			p.Kill()
			<-done
		}
	}
	if r.cancel != nil {
		r.cancel()
	}
	if r.dir != "" {
		if err := cgroupfs.RemoveTree(r.dir); err != nil {
			errs = append(errs, err)
		}
	}
	if r.ld != nil {
		if err := r.ld.Detach(); err != nil {
			errs = append(errs, err)
		}
		r.ld, r.loop = nil, ""
	}
	if r.scratch != "" {
		if err := os.RemoveAll(r.scratch); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
