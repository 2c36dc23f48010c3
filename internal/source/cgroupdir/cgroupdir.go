// Package cgroupdir discovers workloads as cgroups below one parent cgroup.
// With the children layout every direct child directory of, say,
// /system.slice is a workload named after the directory. With the lxc
// layout every lxc.payload.NAME below the parent (the hierarchy's root by
// default) is the LXC container NAME; with the podman layout every
// libpod-<id>[.scope] is a podman container. With the kubepods
// layout the parent is the kubelet's cgroup root (kubepods or
// kubepods.slice) and every container of every pod is a workload with the
// id pod<uid>/<container id>, labelled with its pod's uid and QoS class,
// and named namespace/pod/container where the kubelet's log links say so
// (Options.KubeletLogs, kubenames.go), else by its id.
//
// Since only Docker has labels, pins and exemptions come from globs on the
// workload names or ids (Options.Exempt, Options.Levels, and for Kubernetes
// Options.ExemptGuaranteed); they are expressed as the ddiskqos.exempt and
// ddiskqos.level labels, so the policy treats them exactly as Docker's.
//
// Changes are noticed through inotify on every directory the walk goes
// through (the parent; with kubepods also the QoS and pod directories):
// cgroupfs reports mkdir and rmdir of child cgroups as IN_CREATE and
// IN_DELETE, v1 and v2 alike (measured on the blkio hierarchy of a 6.x
// kernel). A periodic rescan is the safety net for anything inotify
// misses: a queue overflow, the parent itself being removed and made
// again, or no inotify at all. Every inotify event only triggers a rescan,
// and the rescan's difference with what was already reported is what gets
// sent, so the two paths can never disagree.
package cgroupdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/source"
)

// DefaultRescan is how often the parent is listed again even when inotify
// reported nothing.
const DefaultRescan = 10 * time.Second

// watchedFactor stretches the rescan period while the inotify watch on the
// parent is in place (the last arm succeeded): then every failure inotify
// has announces itself as an event (IN_Q_OVERFLOW, IN_DELETE_SELF,
// IN_MOVE_SELF), which rescans at once, so the safety net is for what no
// event covers. A rescan reads the whole parent directory and diffs it
// against the children known, a cost that grows with their number: every
// 60 s instead of 10 s.
// Without a watch (none, or the parent gone) the period is Rescan.
const watchedFactor = 6

// podsPeriod is how often the kubelet's pod list is read again
// (Options.KubeletPods), for an annotation changed on a running pod.
const podsPeriod = 10 * time.Second

// Labels the kubepods layout puts on its workloads.
const (
	// LabelPodUID is the pod's uid, under the key the CRI runtimes use
	// for it on containers.
	LabelPodUID = "io.kubernetes.pod.uid"
	// LabelQoSClass is the pod's QoS class as Kubernetes spells it:
	// Guaranteed, Burstable or BestEffort.
	LabelQoSClass = "ddiskqos.qos_class"
)

// Kubernetes' QoS classes.
const (
	QoSGuaranteed = "Guaranteed"
	QoSBurstable  = "Burstable"
	QoSBestEffort = "BestEffort"
)

// LevelGlob pins the workloads whose names match Glob at Level.
type LevelGlob struct {
	Glob  string
	Level int // 1..4
}

// Options configure a Source.
type Options struct {
	// Hierarchy is the I/O hierarchy the parent lives in (its mount is a
	// value, so tests can use a directory tree in t.TempDir()).
	Hierarchy cgroupfs.Hierarchy
	// Parent is the parent cgroup relative to the hierarchy, e.g. "/lxc",
	// or the absolute path of its directory under the hierarchy's mount
	// (see ParentPath).
	Parent string
	// Layout says where the workloads are below Parent; "" is LayoutAuto.
	Layout Layout
	// Exempt are globs (path.Match) on workload names: a workload that
	// matches one is exempt, as a container labelled ddiskqos.exempt=true
	// is: left alone, its original values restored.
	Exempt []string
	// Levels pin the workloads whose names match a glob at a level, as the
	// ddiskqos.level label does; the first matching glob wins, and Exempt
	// wins over Levels.
	Levels []LevelGlob
	// ExemptGuaranteed makes the containers of Guaranteed pods exempt
	// (LayoutKubepods): their requests equal their limits, the operator
	// promised them their resources.
	ExemptGuaranteed bool
	// KubeletLogs is the kubelet's directory of container log links,
	// /var/log/containers on a node (LayoutKubepods): a container it links
	// is named <namespace>/<pod>/<container>, one of a linked pod that
	// has no link of its own (the sandbox) <namespace>/<pod>/<short id>.
	// "" or a directory that cannot be read: pod<uid>/<id>, the id.
	KubeletLogs string
	// KubeletPods is the URL of the kubelet's pod list
	// (http://127.0.0.1:10255/pods, its read-only port; LayoutKubepods):
	// the ddiskqos.* annotations of a pod become labels of each of its
	// containers, read as Docker's labels are (ddiskqos.level,
	// ddiskqos.exempt). "": annotations are not read.
	KubeletPods string
	// Rescan is the period of the safety-net rescan; 0 means DefaultRescan.
	// While the inotify watch is in place it is watchedFactor times longer.
	Rescan time.Duration
	// NoInotify disables inotify, leaving only the periodic rescan.
	NoInotify bool
	// Logger receives debug messages; nil discards them.
	Logger *slog.Logger
}

// Source reports the workload cgroups below one parent.
type Source struct {
	parent  string // cleaned, absolute inside the hierarchy
	dir     string // parent's directory on disk
	layout  Layout // LayoutChildren or LayoutKubepods
	exempt  []string
	levels  []LevelGlob
	exGuar  bool
	kube    *kubeNames // LayoutKubepods with KubeletLogs, else nil
	kubeErr string     // the last error reading kube's directory, logged once
	pods    *kubePods  // LayoutKubepods with KubeletPods, else nil
	podsErr string     // the last error reading pods, logged once
	rescan  time.Duration
	notify  bool
	log     *slog.Logger
}

var _ source.Source = (*Source)(nil)

// ParentPath turns a --cgroup-parent into a cgroup path inside h: a cgroup
// path (/lxc, as in /proc/PID/cgroup) is kept; the absolute path of a
// directory under h's mount (/sys/fs/cgroup/blkio/lxc) is made relative to
// the mount. A path under another cgroup mount (/sys/fs/cgroup/memory/lxc
// when I/O is controlled through blkio) is refused, naming both.
func ParentPath(h cgroupfs.Hierarchy, p string) (string, error) {
	if p == "" {
		return "", errors.New("cgroup parent: empty, want a cgroup path such as /lxc")
	}
	clean := filepath.Clean("/" + p)
	mount := filepath.Clean(h.Mount)
	if h.Mount != "" && (clean == mount || strings.HasPrefix(clean, mount+"/")) {
		return "/" + strings.TrimPrefix(strings.TrimPrefix(clean, mount), "/"), nil
	}
	cgroupRoot := "/sys/fs/cgroup"
	if h.Mount != "" && h.Version == 1 {
		cgroupRoot = filepath.Dir(mount) // /sys/fs/cgroup for /sys/fs/cgroup/blkio
	}
	if clean == cgroupRoot || strings.HasPrefix(clean, cgroupRoot+"/") || strings.HasPrefix(clean, "/sys/fs/cgroup/") {
		return "", fmt.Errorf("cgroup parent %s: a directory outside the I/O hierarchy's mount %s; "+
			"give a directory under %s, or the cgroup path as in /proc/PID/cgroup (such as /lxc)", p, mount, mount)
	}
	return clean, nil
}

// New validates the options. The parent directory need not exist yet; Run
// fails if it is missing when it starts.
func New(o Options) (*Source, error) {
	var errs []error
	if o.Rescan < 0 {
		errs = append(errs, fmt.Errorf("cgroup rescan interval: %s is negative", o.Rescan))
	}
	parent, err := ParentPath(o.Hierarchy, o.Parent)
	if err != nil {
		errs = append(errs, err)
	}
	dir, err := o.Hierarchy.Path(parent)
	if err != nil && parent != "" {
		errs = append(errs, fmt.Errorf("cgroup parent: %w", err))
	}
	layout := o.Layout
	switch layout {
	case "", LayoutAuto:
		layout = autoLayout(parent, dir)
	case LayoutChildren, LayoutKubepods:
		if parent == "/" {
			errs = append(errs, fmt.Errorf("cgroup layout %s with the root cgroup as parent: the root's children "+
				"include init.scope and the system's own services; give a parent below it, or --cgroup-layout lxc", layout))
		}
	case LayoutLXC, LayoutPodman:
	default:
		errs = append(errs, fmt.Errorf("cgroup layout %q: want auto, children, kubepods, lxc or podman", o.Layout))
	}
	for _, g := range o.Exempt {
		if err := globProblem(g); err != nil {
			errs = append(errs, fmt.Errorf("cgroup exempt pattern %q: %w", g, err))
		}
	}
	for _, l := range o.Levels {
		if err := globProblem(l.Glob); err != nil {
			errs = append(errs, fmt.Errorf("cgroup level pattern %q: %w", l.Glob, err))
		}
		if l.Level < 1 || l.Level > policy.NumLevels {
			errs = append(errs, fmt.Errorf("cgroup level pattern %q: level %d, want 1 to %d", l.Glob, l.Level, policy.NumLevels))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	s := &Source{parent: parent, dir: dir, layout: layout, rescan: o.Rescan, notify: !o.NoInotify, log: o.Logger,
		exempt: slices.Clone(o.Exempt), levels: slices.Clone(o.Levels), exGuar: o.ExemptGuaranteed}
	if s.rescan == 0 {
		s.rescan = DefaultRescan
	}
	if layout == LayoutKubepods && o.KubeletLogs != "" {
		s.kube = newKubeNames(filepath.Clean(o.KubeletLogs))
	}
	if layout == LayoutKubepods && o.KubeletPods != "" {
		s.pods = newKubePods(o.KubeletPods)
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

// globProblem checks a pattern on workload names.
func globProblem(g string) error {
	if g == "" {
		return errors.New("empty pattern")
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("bad glob: %w", err)
	}
	return nil
}

// Name returns "cgroup:<parent>", with " (kubepods)" or " (lxc)" for
// those layouts.
func (s *Source) Name() string {
	if s.layout != LayoutChildren {
		return "cgroup:" + s.parent + " (" + string(s.layout) + ")"
	}
	return "cgroup:" + s.parent
}

// Layout is the layout in use (LayoutAuto resolved).
func (s *Source) Layout() Layout { return s.layout }

// Run reports the current workloads as Added, then Synced, then each one
// that appears or disappears, until ctx ends. It fails only when the
// parent cannot be listed at the start. If the parent disappears later,
// its workloads are reported Removed and it is watched for again.
func (s *Source) Run(ctx context.Context, out chan<- source.Event) error {
	var w *watcher
	if s.notify {
		var err error
		w, err = newWatcher()
		if err != nil {
			s.log.Info("inotify unavailable, rescanning periodically only", "dir", s.dir, "interval", s.rescan, "err", err)
		} else {
			defer w.close()
		}
	}
	// The workloads reported Added, by their path below the parent, with
	// what knownAs says of it; a Workload is rebuilt from the path (workload),
	// so the map holds no second copy of 10,000 records.
	known := map[string]string{}
	rels, watched, err := s.scanArmed(w)
	if err != nil {
		return err
	}
	if err := s.report(ctx, out, known, rels); err != nil {
		return nil // ctx ended
	}
	if err := source.Send(ctx, out, source.Event{Kind: source.Synced}); err != nil {
		return nil
	}
	period := func() time.Duration {
		if watched {
			return watchedFactor * s.rescan
		}
		return s.rescan
	}
	timer := time.NewTimer(period())
	defer timer.Stop()
	// A pod's annotations change without a cgroup event: with KubeletPods
	// the pod list is read again every podsPeriod.
	var podsTick <-chan time.Time
	if s.pods != nil {
		t := time.NewTicker(podsPeriod)
		defer t.Stop()
		podsTick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-w.changed():
		case <-podsTick:
		}
		rels, watched, err = s.scanArmed(w)
		timer.Reset(period())
		switch {
		case errors.Is(err, fs.ErrNotExist):
			rels = nil // parent gone: everything below it is gone
		case err != nil:
			s.log.Debug("rescan failed, keeping the last known workloads", "dir", s.dir, "err", err)
			continue
		}
		if err := s.report(ctx, out, known, rels); err != nil {
			return nil
		}
	}
}

// scanArmed scans, then watches every directory the scan went through.
// When that put a watch on a directory not watched before (the parent at
// start or made again, a new pod), anything made in it between its scan
// and its watch would be missed, so it scans again (a few times at most:
// the safety-net rescan covers a tree that never settles). watched is
// whether the parent is watched.
func (s *Source) scanArmed(w *watcher) (rels []string, watched bool, err error) {
	for range 4 {
		var dirs []string
		rels, dirs, err = s.scan()
		if w == nil || err != nil {
			return rels, false, err
		}
		var fresh bool
		watched, fresh = w.arm(s.dir, dirs)
		if !fresh {
			break
		}
	}
	return rels, watched, err
}

// scan lists the workloads below the parent as paths relative to it,
// sorted, and the directories it read.
func (s *Source) scan() (rels, dirs []string, err error) {
	top, err := subdirs(s.dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list cgroup parent %s: %w", s.dir, err)
	}
	switch s.layout {
	case LayoutChildren:
		return top, []string{s.dir}, nil
	case LayoutLXC:
		for _, e := range top {
			if _, ok := lxcName(e); ok {
				rels = append(rels, e)
			}
		}
		return rels, []string{s.dir}, nil // top is sorted
	case LayoutPodman:
		for _, e := range top {
			if _, ok := libpodID(e); ok {
				rels = append(rels, e)
			}
		}
		return rels, []string{s.dir}, nil
	}
	dirs = []string{s.dir}
	if s.kube != nil {
		s.kube.read()
		s.logChanged(&s.kubeErr, s.kube.err, "cannot read the kubelet's container log links: containers named pod<uid>/<id> until they can be read",
			"dir", s.kube.dir)
		dirs = append(dirs, s.kube.dir)
	}
	pods := func(rel string) {
		d := filepath.Join(s.dir, rel)
		ents, err := subdirs(d)
		if err != nil {
			return // removed while walking: the next scan sees it gone
		}
		dirs = append(dirs, d)
		for _, c := range ents {
			if _, ok := containerID(c); ok {
				rels = append(rels, rel+"/"+c)
			}
		}
	}
	for _, e := range top {
		if _, ok := qosOfDir(e); ok {
			d := filepath.Join(s.dir, e)
			ents, err := subdirs(d)
			if err != nil {
				continue
			}
			dirs = append(dirs, d)
			for _, p := range ents {
				if _, ok := podUID(p); ok {
					pods(e + "/" + p)
				}
			}
		} else if _, ok := podUID(e); ok {
			pods(e)
		}
	}
	slices.Sort(rels)
	return rels, dirs, nil
}

// subdirs lists the child directories of dir, sorted.
func subdirs(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	return names, nil // ReadDir sorts by name
}

// report sends Removed for known workloads not in rels, Added for new
// ones and Updated for known ones whose name changed (the kubelet linked
// a container's log, or a pod's ddiskqos.* annotations changed), in order, and updates known. It returns ctx's error
// if ctx ends.
func (s *Source) report(ctx context.Context, out chan<- source.Event, known map[string]string, rels []string) error {
	if s.pods != nil {
		s.pods.read(ctx)
		s.logChanged(&s.podsErr, s.pods.err, "cannot read the kubelet's pod list: pod annotations kept as last read",
			"url", s.pods.url)
	}
	present := make(map[string]bool, len(rels))
	for _, n := range rels {
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
	for _, n := range rels {
		was, ok := known[n]
		if ok && s.kube == nil && s.pods == nil {
			continue // the name is the path's, the labels fixed: neither can change
		}
		wl, valid := s.workload(n)
		if !valid {
			s.log.Debug("skipping a cgroup whose name leaves the parent", "parent", s.parent, "name", n)
			continue
		}
		kind := source.Added
		if ok {
			if knownAs(wl) == was {
				continue
			}
			kind = source.Updated
		}
		if err := source.Send(ctx, out, source.Event{Kind: kind, Workload: wl}); err != nil {
			return err
		}
		known[n] = knownAs(wl)
	}
	return nil
}

// logChanged logs err with msg and args when it differs from the one
// last logged, kept in *last ("" for none): an error that persists is
// logged once, not at every scan.
func (s *Source) logChanged(last *string, err error, msg string, args ...any) {
	if err == nil {
		*last = ""
		return
	}
	if e := err.Error(); e != *last {
		s.log.Info(msg, append(args, "err", err)...)
		*last = e
	}
}

// knownAs is what report remembers of a workload to tell a change: its
// name and the policy's labels.
func knownAs(wl source.Workload) string {
	return wl.Name + "\x00" + wl.Labels[policy.LabelLevel] + "\x00" + wl.Labels[policy.LabelExempt]
}

// workload is the cgroup rel (below the parent) as a workload; false when
// rel would leave the parent or is not one of the layout's.
func (s *Source) workload(rel string) (source.Workload, bool) {
	for _, e := range strings.Split(rel, "/") {
		if e == "" || e == "." || e == ".." { // never from ReadDir; refused anyway
			return source.Workload{}, false
		}
	}
	cg, err := cgroupfs.Within(s.parent, rel)
	if err != nil || cg != path.Join(s.parent, rel) {
		return source.Workload{}, false
	}
	var wl source.Workload
	qos := ""
	switch s.layout {
	case LayoutChildren:
		if strings.Contains(rel, "/") {
			return source.Workload{}, false
		}
		wl = source.Workload{ID: rel, Name: rel, Cgroup: cg}
	case LayoutLXC:
		name, ok := lxcName(rel)
		if !ok || strings.Contains(rel, "/") {
			return source.Workload{}, false
		}
		wl = source.Workload{ID: name, Name: name, Cgroup: cg}
	case LayoutPodman:
		id, ok := libpodID(rel)
		if !ok || strings.Contains(rel, "/") {
			return source.Workload{}, false
		}
		wl = source.Workload{ID: id, Name: shortID(id), Cgroup: cg}
	default:
		var ok bool
		if wl, qos, ok = s.kubeWorkload(rel, cg); !ok {
			return source.Workload{}, false
		}
	}
	set := func(k, v string) {
		if wl.Labels == nil {
			wl.Labels = map[string]string{}
		}
		wl.Labels[k] = v
	}
	switch {
	case s.exGuar && qos == QoSGuaranteed, s.matches(wl.Name), wl.ID != wl.Name && s.matches(wl.ID):
		set(policy.LabelExempt, "true")
	default:
		for _, l := range s.levels {
			if ok, _ := path.Match(l.Glob, wl.Name); ok || wl.ID != wl.Name && globMatch(l.Glob, wl.ID) {
				set(policy.LabelLevel, strconv.Itoa(l.Level))
				break
			}
		}
	}
	return wl, true
}

// globMatch is path.Match without its error (the globs were checked in New).
func globMatch(glob, name string) bool {
	ok, _ := path.Match(glob, name)
	return ok
}

// matches reports whether name matches an exempt glob.
func (s *Source) matches(name string) bool {
	for _, g := range s.exempt {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
