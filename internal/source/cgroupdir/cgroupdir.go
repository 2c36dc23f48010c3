// Package cgroupdir discovers workloads as the child cgroups of one parent
// cgroup: every direct child directory of, say, /lxc or /kubepods.slice is a
// workload named after the directory.
//
// Changes are noticed through inotify on the parent directory (cgroupfs
// reports mkdir and rmdir of child cgroups as IN_CREATE and IN_DELETE, v1 and
// v2 alike; measured on the blkio hierarchy of a 6.x kernel), with a periodic
// rescan as the safety net for anything inotify misses: a queue overflow, the
// parent itself being removed and made again, or no inotify at all. Every
// inotify event only triggers a rescan, and the rescan's difference with what
// was already reported is what gets sent, so the two paths can never
// disagree.
package cgroupdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// DefaultRescan is how often the parent is listed again even when inotify
// reported nothing.
const DefaultRescan = 10 * time.Second

// watchedFactor stretches the rescan period while the inotify watch on the
// parent is in place (the last arm succeeded): then every failure inotify
// has announces itself as an event (IN_Q_OVERFLOW, IN_DELETE_SELF,
// IN_MOVE_SELF), which rescans at once, so the safety net is for what no
// event covers. With 10,000 children one rescan costs ~10 ms of CPU and
// 10,000 allocations (ReadDir and the diff): every 60 s instead of 10 s.
// Without a watch (none, or the parent gone) the period is Rescan.
const watchedFactor = 6

// Options configure a Source.
type Options struct {
	// Hierarchy is the I/O hierarchy the parent lives in (its mount is a
	// value, so tests can use a directory tree in t.TempDir()).
	Hierarchy cgroupfs.Hierarchy
	// Parent is the parent cgroup relative to the hierarchy, e.g. "/lxc".
	Parent string
	// Rescan is the period of the safety-net rescan; 0 means DefaultRescan.
	// While the inotify watch is in place it is watchedFactor times longer.
	Rescan time.Duration
	// NoInotify disables inotify, leaving only the periodic rescan.
	NoInotify bool
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
}

// Source reports the child cgroups of one parent as workloads.
type Source struct {
	parent string // cleaned, absolute inside the hierarchy
	dir    string // parent's directory on disk
	rescan time.Duration
	notify bool
	log    *slog.Logger
}

var _ source.Source = (*Source)(nil)

// New validates the options. The parent directory need not exist yet; Run
// fails if it is missing when it starts.
func New(o Options) (*Source, error) {
	var errs []error
	if o.Parent == "" {
		errs = append(errs, errors.New("cgroup parent: empty, want a cgroup path such as /lxc"))
	}
	if o.Rescan < 0 {
		errs = append(errs, fmt.Errorf("cgroup rescan interval: %s is negative", o.Rescan))
	}
	parent := filepath.Clean("/" + o.Parent)
	dir, err := o.Hierarchy.Path(parent)
	if err != nil {
		errs = append(errs, fmt.Errorf("cgroup parent: %w", err))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Source{parent: parent, dir: dir, rescan: o.Rescan, notify: !o.NoInotify, log: o.Logger}
	if s.rescan == 0 {
		s.rescan = DefaultRescan
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// Name returns "cgroup:<parent>".
func (s *Source) Name() string { return "cgroup:" + s.parent }

// Run reports the current children as Added, then each child that appears
// or disappears, until ctx ends. It fails only when the parent cannot be
// listed at the start. If the parent disappears later, its children are
// reported Removed and it is watched for again.
func (s *Source) Run(ctx context.Context, out chan<- source.Event) error {
	var w *watcher
	if s.notify {
		var err error
		w, err = newWatcher(s.dir)
		if err != nil {
			s.log.Info("inotify unavailable, rescanning periodically only", "dir", s.dir, "interval", s.rescan, "err", err)
		} else {
			defer w.close()
		}
	}
	// The names reported Added; a Workload is rebuilt from its name
	// (workload), so the map holds no second copy of 10,000 records.
	known := map[string]struct{}{}
	names, err := s.scan()
	if err != nil {
		return err
	}
	if err := s.report(ctx, out, known, names); err != nil {
		return nil // ctx ended
	}
	watched := w != nil && w.armed
	period := func() time.Duration {
		if watched {
			return watchedFactor * s.rescan
		}
		return s.rescan
	}
	timer := time.NewTimer(period())
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-w.changed():
		}
		if w != nil {
			// Idempotent while the directory lives; re-arms the watch when
			// the parent was removed and made again (a new inode). Armed
			// before the scan so nothing made in between is missed.
			watched = w.arm()
		}
		timer.Reset(period())
		names, err := s.scan()
		switch {
		case errors.Is(err, fs.ErrNotExist):
			names = nil // parent gone: everything below it is gone
		case err != nil:
			s.log.Debug("rescan failed, keeping the last known children", "dir", s.dir, "err", err)
			continue
		}
		if err := s.report(ctx, out, known, names); err != nil {
			return nil
		}
	}
}

// scan lists the child cgroups of the parent, sorted.
func (s *Source) scan() ([]string, error) {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list cgroup parent %s: %w", s.dir, err)
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil // ReadDir sorts by name
}

// report sends Removed for known children not in names and Added for new
// ones, in name order, and updates known. It returns ctx's error if ctx ends.
func (s *Source) report(ctx context.Context, out chan<- source.Event, known map[string]struct{}, names []string) error {
	present := make(map[string]bool, len(names))
	for _, n := range names {
		present[n] = true
	}
	var gone []string
	for n := range known {
		if !present[n] {
			gone = append(gone, n)
		}
	}
	slices.Sort(gone)
	for _, n := range gone {
		wl, _ := s.workload(n) // it was valid when added
		if err := source.Send(ctx, out, source.Event{Kind: source.Removed, Workload: wl}); err != nil {
			return err
		}
		delete(known, n)
	}
	for _, n := range names {
		if _, ok := known[n]; ok {
			continue
		}
		wl, ok := s.workload(n)
		if !ok {
			s.log.Debug("skipping child cgroup whose name leaves the parent", "parent", s.parent, "name", n)
			continue
		}
		if err := source.Send(ctx, out, source.Event{Kind: source.Added, Workload: wl}); err != nil {
			return err
		}
		known[n] = struct{}{}
	}
	return nil
}

// workload is the child cgroup n as a workload; false when n would leave
// the parent.
func (s *Source) workload(n string) (source.Workload, bool) {
	cg, err := cgroupfs.Within(s.parent, n)
	if err != nil || filepath.Dir(cg) != s.parent {
		return source.Workload{}, false
	}
	return source.Workload{ID: n, Name: n, Cgroup: cg}, true
}

// watcher is an inotify instance watching one directory. Events are not
// decoded: any of them only means "rescan now".
type watcher struct {
	dir   string
	fd    int
	file  *os.File // the fd, non-blocking, so Read parks in the runtime poller and Close wakes it
	ch    chan struct{}
	wg    sync.WaitGroup
	armed bool // the watch was in place at start
}

// watchMask: a child made, removed, or renamed in or out; the parent itself
// removed or moved (the rescan then finds it gone and re-arms).
const watchMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

func newWatcher(dir string) (*watcher, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify_init1: %w", err)
	}
	w := &watcher{dir: dir, fd: fd, file: os.NewFile(uintptr(fd), "inotify"), ch: make(chan struct{}, 1)}
	_, err = unix.InotifyAddWatch(fd, dir, watchMask)
	if err != nil && !errors.Is(err, unix.ENOENT) {
		w.file.Close()
		return nil, fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	w.armed = err == nil
	w.wg.Add(1)
	go w.read()
	return w, nil
}

func (w *watcher) read() {
	defer w.wg.Done()
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.file.Read(buf)
		if err != nil {
			return // closed
		}
		if n > 0 {
			select {
			case w.ch <- struct{}{}:
			default: // a rescan is already pending; it will see this change too
			}
		}
	}
}

// arm (re)adds the watch on the directory and reports whether it is in
// place; a missing directory is no error (watched for again at the next
// rescan).
func (w *watcher) arm() bool {
	_, err := unix.InotifyAddWatch(w.fd, w.dir, watchMask)
	return err == nil
}

// changed returns the channel that fires after inotify events; nil (never
// fires) when there is no watcher.
func (w *watcher) changed() <-chan struct{} {
	if w == nil {
		return nil
	}
	return w.ch
}

func (w *watcher) close() {
	w.file.Close()
	w.wg.Wait()
}
