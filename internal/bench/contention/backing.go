package contention

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/host"
)

// BackingOf says what a directory's files sit on, as the report states a
// device class: the filesystem (type and source) of the longest mount
// point above dir in /proc/self/mounts and, where its source is a block
// device, that disk's scheduler, rotational flag and hardware queue depth
// (nr_requests). "" when the mounts cannot be read.
func BackingOf(roots host.Roots, dir string) string {
	f, err := os.Open(filepath.Join(roots.Proc, "self", "mounts"))
	if err != nil {
		return ""
	}
	defer f.Close()
	dir = filepath.Clean(dir)
	var best, src, typ string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) < 3 {
			continue
		}
		mp := fs[1]
		if (dir == mp || strings.HasPrefix(dir, strings.TrimSuffix(mp, "/")+"/")) && len(mp) >= len(best) {
			best, src, typ = mp, fs[0], fs[2]
		}
	}
	if best == "" {
		return ""
	}
	out := fmt.Sprintf("%s (%s on %s)", typ, src, best)
	dev, ok := strings.CutPrefix(src, "/dev/")
	if !ok {
		return out
	}
	// A partition's queue is its disk's: /sys/class/block/<part>/../queue.
	q := filepath.Join(roots.Sys, "class", "block", dev, "queue")
	if _, err := os.Stat(q); err != nil {
		q = filepath.Join(roots.Sys, "class", "block", dev, "..", "queue")
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(q, name))
		if err != nil {
			return "?"
		}
		return strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%s; the disk: scheduler %s, rotational %s, nr_requests %s, max_sectors_kb %s", out,
		read("scheduler"), read("rotational"), read("nr_requests"), read("max_sectors_kb"))
}
