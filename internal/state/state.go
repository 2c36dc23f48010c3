// Package state keeps the daemon's crash-safe memory: the original value of
// every knob it wrote (so a restarted daemon can restore them) and the level
// of every workload (so a restart does not hand bulk containers level 1).
package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/actuate"
	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// Version is the state file format version.
const Version = 1

// File is the content of the state file.
type File struct {
	Version int       `json:"version"`
	Written time.Time `json:"written"`
	// Hierarchy is where the originals' cgroups live: a file written for
	// another mount is not adopted.
	HierarchyVersion int                `json:"hierarchy_version"`
	HierarchyMount   string             `json:"hierarchy_mount"`
	Originals        []actuate.Original `json:"originals"`
	Workloads        []Workload         `json:"workloads"`
}

// Workload is one workload's saved policy state.
type Workload struct {
	Cgroup string      `json:"cgroup"`
	View   policy.View `json:"view"`
}

// Load reads the state file; a missing file is an empty state and no error.
func Load(path string) (File, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return File{Version: Version}, nil
	}
	if err != nil {
		return File{}, fmt.Errorf("read state file %s: %w", path, err)
	}
	var f File
	if err := json.Unmarshal(data, &f); err != nil {
		return File{}, fmt.Errorf("state file %s is corrupt (%v): move it away to start afresh", path, err)
	}
	if f.Version != Version {
		return File{}, fmt.Errorf("state file %s has version %d, this ddiskqos reads %d", path, f.Version, Version)
	}
	return f, nil
}

// Save writes the state file atomically: a temporary file in the same
// directory, synced, then renamed over the old one.
func Save(path string, f File) error {
	f.Version = Version
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("state dir %s: %w", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".state-*.tmp")
	if err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("sync state file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write state file %s: %w", path, err)
	}
	return nil
}
