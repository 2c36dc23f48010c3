// Package cgroupfs reads and writes the block-I/O files of cgroups, v1 and v2.
//
// Nothing in this package hard-codes /sys/fs/cgroup or /proc: the layout is
// detected from a mountinfo file whose path is passed in, and every cgroup is
// addressed relative to a Hierarchy whose mount point is a value. Tests point
// the same code at a tree in t.TempDir().
package cgroupfs

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Mode is how cgroups are mounted on a host.
type Mode string

const (
	// ModeV1 is legacy cgroups only: one hierarchy per controller, no cgroup2.
	ModeV1 Mode = "v1"
	// ModeV2 is the unified hierarchy only.
	ModeV2 Mode = "v2"
	// ModeHybrid is v1 controllers plus a cgroup2 mount (usually empty, at
	// /sys/fs/cgroup/unified). Block I/O is then controlled through v1 blkio.
	ModeHybrid Mode = "hybrid"
)

// V1Mount is one mounted cgroup v1 hierarchy.
type V1Mount struct {
	// Mountpoint is where the hierarchy is mounted, e.g. /sys/fs/cgroup/blkio.
	Mountpoint string
	// Root is the cgroup of this mount's root inside the hierarchy ("/" on a
	// host, "/docker/<id>" inside a container that sees only its own part).
	Root string
	// Controllers are the controllers bound to it (blkio, cpu, ...), and
	// named hierarchies as "name=systemd".
	Controllers []string
}

// Layout is the cgroup layout of a host, as its mount table tells it.
type Layout struct {
	Mode Mode
	// V1 lists the v1 hierarchies in mount-table order.
	V1 []V1Mount
	// Unified is the cgroup2 mount point, "" when none is mounted.
	Unified string
	// UnifiedRoot is the cgroup of the cgroup2 mount's root ("/" on a host).
	UnifiedRoot string
}

// V1Controller returns the mount of a v1 controller, and whether it exists.
func (l Layout) V1Controller(name string) (V1Mount, bool) {
	for _, m := range l.V1 {
		if slices.Contains(m.Controllers, name) {
			return m, true
		}
	}
	return V1Mount{}, false
}

// IOHierarchy returns the hierarchy through which block I/O is accounted and
// controlled: v1 blkio when it is mounted (v1 and hybrid hosts), otherwise the
// unified hierarchy. It fails when neither is available.
func (l Layout) IOHierarchy() (Hierarchy, error) {
	if m, ok := l.V1Controller("blkio"); ok {
		return Hierarchy{Version: 1, Mount: m.Mountpoint}, nil
	}
	if l.Unified != "" {
		return Hierarchy{Version: 2, Mount: l.Unified}, nil
	}
	return Hierarchy{}, fmt.Errorf("no blkio (v1) or cgroup2 mount found in the mount table: %w", ErrNoIOHierarchy)
}

// DetectLayout reads a mountinfo file (normally /proc/self/mountinfo) and
// returns the cgroup layout it describes.
func DetectLayout(mountinfoPath string) (Layout, error) {
	f, err := os.Open(mountinfoPath)
	if err != nil {
		return Layout{}, fmt.Errorf("detect cgroup layout: %w", err)
	}
	defer f.Close()
	l, err := ParseMountInfo(f)
	if err != nil {
		return Layout{}, fmt.Errorf("detect cgroup layout from %s: %w", mountinfoPath, err)
	}
	return l, nil
}

// ParseMountInfo parses a mountinfo file (see ParseMountLine) and returns
// the cgroup layout it describes. Only lines whose filesystem type is
// "cgroup" or "cgroup2" count, but every line must be well formed. For
// cgroup v1 the controllers are the super options, less the generic ones.
func ParseMountInfo(r io.Reader) (Layout, error) {
	mounts, err := ParseMounts(r)
	if err != nil {
		return Layout{}, err
	}
	var l Layout
	for _, m := range mounts {
		if m.FSType != "cgroup" && m.FSType != "cgroup2" {
			continue
		}
		root := filepath.Clean(m.Root)
		mountpoint := filepath.Clean(m.Mountpoint)
		if m.FSType == "cgroup2" {
			if l.Unified == "" {
				l.Unified = mountpoint
				l.UnifiedRoot = root
			}
			continue
		}
		var ctls []string
		for _, o := range strings.Split(m.SuperOpts, ",") {
			switch {
			case o == "", o == "rw", o == "ro", o == "clone_children", o == "noprefix",
				o == "xattr", o == "cpuset_v2_mode", o == "favordynmods",
				strings.HasPrefix(o, "release_agent="):
				continue
			}
			ctls = append(ctls, o)
		}
		l.V1 = append(l.V1, V1Mount{Mountpoint: mountpoint, Root: root, Controllers: ctls})
	}
	hasV1Controller := false
	for _, m := range l.V1 {
		for _, c := range m.Controllers {
			if !strings.HasPrefix(c, "name=") {
				hasV1Controller = true
			}
		}
	}
	switch {
	case hasV1Controller && l.Unified != "":
		l.Mode = ModeHybrid
	case hasV1Controller:
		l.Mode = ModeV1
	case l.Unified != "":
		l.Mode = ModeV2
	default:
		return Layout{}, ErrNoCgroupMounts
	}
	return l, nil
}
