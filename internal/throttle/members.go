package throttle

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// What a period of the throttle's fast loop looks at: the watched members
// and the parents whose counters reveal a better level's I/O, opened again
// only when members come or go.

// rebuildWatch lists the members a period looks at: the demoted, and
// those with a cap (or a failed write) still to lift. A member dropped
// since (dropLocked) sets setNew, so the list is rebuilt before its next
// use.
func (t *Throttle) rebuildWatch() {
	t.watch = t.watch[:0]
	for _, m := range t.members {
		if t.Wants(m.level) || m.twatch != nil && (!m.limits.IsZero() || m.err != nil) {
			m.watched()
			t.watch = append(t.watch, m)
		}
	}
}

// parentOf is the directory above cgroup: the name a member already has
// when it is one of the parents known (dirs), so that members share it.
func (t *Throttle) parentOf(cgroup string) string {
	p := path.Dir(path.Clean("/" + cgroup))
	if i, ok := slices.BinarySearch(t.dirs, p); ok {
		return t.dirs[i]
	}
	return p
}

// rebuildParents opens the parents of the managed cgroups: the outermost
// distinct parent directories. Run when members came or went, not when
// their levels changed.
func (t *Throttle) rebuildParents() {
	dirs := t.dirs[:0]
	for _, m := range t.members {
		if m.parent == "" {
			m.parent = path.Dir(path.Clean("/" + m.cgroup))
		}
		dirs = append(dirs, m.parent)
	}
	slices.Sort(dirs)
	dirs = slices.Compact(dirs)
	t.dirs = dirs
	// Members under one directory share its name (10,000 copies of it
	// were 1 MB).
	for _, m := range t.members {
		if i, ok := slices.BinarySearch(dirs, m.parent); ok {
			m.parent = dirs[i]
		}
	}
	var outer []string
	for _, d := range dirs {
		nested := false
		for _, o := range outer {
			if o == "/" || strings.HasPrefix(d, o+"/") {
				nested = true
				break
			}
		}
		if !nested {
			outer = append(outer, d)
		}
	}
	same := len(outer) == len(t.parents)
	for i := 0; same && i < len(outer); i++ {
		same = t.parents[i].rel == outer[i]
	}
	if same {
		return
	}
	t.closeParents()
	for _, d := range outer {
		cg, err := openBytes(t.h, d)
		if err != nil {
			t.log.Warn("throttle: cannot read the counters of a parent cgroup; a better level's I/O under it goes unseen",
				"device", t.name, "cgroup", d, "err", err)
			continue
		}
		t.parents = append(t.parents, &tparent{rel: d, cg: cg})
	}
}

// openBytes opens a cgroup for its byte counters alone: a period needs
// nothing else, and each detail file read would double its cost.
func openBytes(h cgroupfs.Hierarchy, rel string) (*cgroupfs.Cgroup, error) {
	cg, err := h.Open(rel)
	if err != nil {
		return nil, err
	}
	if err := cg.BytesOnly(); err != nil {
		cg.Close()
		return nil, fmt.Errorf("cgroup %s: %w", rel, err)
	}
	return cg, nil
}

func (t *Throttle) closeParents() {
	for _, p := range t.parents {
		t.unwatchParent(p)
		p.cg.Close()
	}
	t.parents = nil
}
