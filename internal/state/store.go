package state

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// Store is the daemon's use of the state file: what a previous run left
// is checked against the cgroups there now (Load), and the file is saved
// again when something worth keeping changed (Save) or before a knob is
// written whose original it must keep (Write, the actuator's
// Config.Persist). A failed save is tried again at the next Save, and Err
// says why it failed until one succeeds.
type Store struct {
	// Path is the state file; "" keeps nothing.
	Path      string
	Hierarchy cgroupfs.Hierarchy
	Log       *slog.Logger
	Now       func() time.Time
	// Originals are the actuator's recorded originals, and whether they
	// changed since it was last asked.
	Originals func() ([]actuate.Original, bool)
	// Workloads appends every tracked workload's policy state to dst.
	Workloads func(dst []Workload) []Workload

	dirty bool
	err   error
	// inos maps a cgroup to the inode of its directory when first seen:
	// kept in the file, so a cgroup created again under the same name after
	// a restart is not taken for the one the entries were for.
	inos map[string]uint64
	// saved are the originals of the last successful save: Save skips the
	// write when Write already saved them.
	saved []actuate.Original
}

// Load reads the state file and keeps the entries whose cgroup is still
// the one they were written for (see adopt). A file written for another
// hierarchy is an error: its originals cannot be restored here.
func (s *Store) Load() (File, error) {
	s.inos = map[string]uint64{}
	var f File
	if s.Path != "" {
		if err := RemoveTemps(s.Path); err != nil {
			s.Log.Warn("leftover temporary state files", "err", err)
		}
		var err error
		if f, err = Load(s.Path); err != nil {
			return File{}, err
		}
		h := s.Hierarchy
		if len(f.Originals) > 0 && (f.HierarchyMount != h.Mount || f.HierarchyVersion != h.Version) {
			return File{}, fmt.Errorf("state file %s was written for cgroup v%d at %s, this host uses v%d at %s: restore or remove it by hand",
				s.Path, f.HierarchyVersion, f.HierarchyMount, h.Version, h.Mount)
		}
	}
	s.adopt(&f)
	return f, nil
}

// adopt drops the entries of f whose cgroup is gone (removed while no
// daemon ran: nothing to restore) or is another cgroup under the same name
// (a different directory inode: its current values are its own, and its
// level is not the old one's), with one log line per cgroup. The inodes of
// the rest are kept.
func (s *Store) adopt(st *File) {
	verdict := map[string]bool{} // cgroup -> keep
	dropped := 0
	log := s.Log
	keep := func(cg, knob string) bool {
		if m, err := mech.ByKnob(knob); err == nil && !m.InCgroup() {
			return true // a container ID, not a cgroup directory
		}
		if k, ok := verdict[cg]; ok {
			return k
		}
		ino, err := s.Hierarchy.DirIno(cg)
		if err != nil || (st.Inodes[cg] != 0 && st.Inodes[cg] != ino) {
			// One line per cgroup, up to maxDropLogs; then a count.
			if dropped++; dropped > maxDropLogs {
				log = slog.New(slog.DiscardHandler)
			}
		}
		switch {
		case errors.Is(err, fs.ErrNotExist):
			log.Info("state file entry dropped: its cgroup was removed while no daemon ran", "cgroup", cg)
		case err != nil:
			log.Warn("state file entry dropped: its cgroup cannot be looked at", "cgroup", cg, "err", err)
		case st.Inodes[cg] != 0 && st.Inodes[cg] != ino:
			log.Info("state file entry dropped: its cgroup was created again under the same name while no daemon ran",
				"cgroup", cg, "inode_then", st.Inodes[cg], "inode_now", ino)
		default:
			s.inos[cg] = ino
			verdict[cg] = true
			return true
		}
		verdict[cg] = false
		return false
	}
	st.Originals = slices.DeleteFunc(st.Originals, func(o actuate.Original) bool { return !keep(o.Cgroup, o.Knob) })
	st.Workloads = slices.DeleteFunc(st.Workloads, func(w Workload) bool { return !keep(w.Cgroup, "") })
	if dropped > maxDropLogs {
		s.Log.Info("state file entries dropped, not each logged", "cgroups", dropped-maxDropLogs)
	}
	if dropped > 0 {
		s.dirty = true // the next save leaves them out
	}
}

// maxDropLogs is how many dropped state file cgroups adopt logs one by one.
const maxDropLogs = 20

// Dirty says something worth keeping changed (a workload came or went, a
// level changed): the next Save writes the file.
func (s *Store) Dirty() { s.dirty = true }

// SetIno records the inode of cgroup cg's directory.
func (s *Store) SetIno(cg string, ino uint64) { s.inos[cg] = ino }

// DropIno forgets cgroup cg's inode, if it is still ino.
func (s *Store) DropIno(cg string, ino uint64) {
	if s.inos[cg] == ino {
		delete(s.inos, cg)
	}
}

// Err is why the last save failed, nil once one succeeded: while it is
// set, new originals are not durable and their knobs are not written.
func (s *Store) Err() error { return s.err }

// Save writes the state file when something worth keeping changed.
func (s *Store) Save() error {
	if s.Path == "" {
		return nil
	}
	origs, changed := s.Originals()
	if changed && !slices.Equal(origs, s.saved) {
		s.dirty = true // kept until a save succeeds
	}
	if !s.dirty {
		return nil
	}
	return s.Write(origs)
}

// Write saves origs and every tracked workload's level.
func (s *Store) Write(origs []actuate.Original) error {
	if s.Path == "" {
		return nil
	}
	// Levels are kept also on a clean shutdown, so a restarted daemon does
	// not hand every bulk workload level 1 again.
	f := File{Written: s.Now().UTC(), HierarchyVersion: s.Hierarchy.Version,
		HierarchyMount: s.Hierarchy.Mount, Originals: origs, Inodes: s.inos}
	f.Workloads = s.Workloads(nil)
	if len(f.Originals) == 0 && len(f.Workloads) == 0 {
		if _, err := os.Stat(s.Path); errors.Is(err, fs.ErrNotExist) {
			s.dirty, s.err, s.saved = false, nil, nil
			return nil // nothing to keep: leave no file behind
		}
	}
	s.saved = nil
	if err := Save(s.Path, f); err != nil {
		if s.err == nil {
			s.Log.Warn("save state: retried every tick; knobs whose original it would keep stay unwritten until it succeeds",
				"file", s.Path, "err", err)
		}
		s.dirty, s.err = true, err
		return err
	}
	if s.err != nil {
		s.Log.Info("state file saved again", "file", s.Path)
	}
	s.dirty, s.err, s.saved = false, nil, origs
	return nil
}
