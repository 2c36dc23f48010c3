// Package source is the collection stage that answers "who exists": it emits
// a workload when it appears, changes, or goes away, each with its cgroup.
//
// Two implementations share the Source interface: docker (the Engine API's
// container list and event stream) and cgroupdir (the child directories of a
// cgroup parent such as /lxc or /kubepods.slice). The daemon loop consumes
// their events; nothing here reads counters or writes limits.
package source

import (
	"context"
	"maps"
)

// Workload is one thing to give disk-I/O QoS to: a container or a cgroup.
type Workload struct {
	// ID is the full container id (docker) or the directory name (cgroupdir).
	ID string
	// Name is the container name without its leading "/" (docker) or the
	// directory name (cgroupdir).
	Name string
	// Labels are the container's labels (docker); for cgroupdir, those its
	// config pins and exemptions and the kubepods layout set, else nil.
	Labels map[string]string
	// Cgroup is the workload's cgroup relative to the I/O hierarchy's mount,
	// e.g. "/docker/<id>", "/system.slice/docker-<id>.scope" or "/lxc/web1".
	// Join it with cgroupfs.Hierarchy.Path, never by hand.
	Cgroup string
	// Pid is the main process id when known (docker), else 0.
	Pid int
}

// Equal reports whether two workloads describe the same thing identically.
func (w Workload) Equal(o Workload) bool {
	return w.ID == o.ID && w.Name == o.Name && w.Cgroup == o.Cgroup && w.Pid == o.Pid &&
		maps.Equal(w.Labels, o.Labels)
}

// EventKind is what happened to a workload.
type EventKind int

const (
	// Added: the workload exists (at start, every current workload is Added).
	Added EventKind = iota + 1
	// Updated: the workload changed (labels, cgroup, pid) or was reconfigured
	// from outside, e.g. by "docker update"; consumers should re-read and
	// re-apply whatever they had written into its cgroup.
	Updated
	// Removed: the workload is gone; its cgroup may already be gone too.
	Removed
	// Synced: the source's first complete listing is done: every workload
	// that existed when it first looked has been sent as Added before it.
	// A workload Added after Synced appeared later; one Added before it was
	// found running. It carries no workload and comes once per Run: a
	// re-listing later (the docker source's, after the engine was out of
	// reach) finds what started meanwhile — after the consumer began — and
	// sends no second Synced.
	Synced
)

func (k EventKind) String() string {
	switch k {
	case Added:
		return "added"
	case Updated:
		return "updated"
	case Removed:
		return "removed"
	case Synced:
		return "synced"
	}
	return "unknown"
}

// Event is one change of one workload.
type Event struct {
	Kind     EventKind
	Workload Workload
}

// Source discovers workloads.
type Source interface {
	// Run sends the current workloads as Added, then Synced once (its first
	// listing is complete), then changes as they happen, until ctx ends. A
	// source that lists nothing until its backend answers (docker at boot)
	// sends Synced after the first listing that succeeds. Run returns nil on
	// ctx cancellation and an error only when it cannot go on.
	Run(ctx context.Context, out chan<- Event) error
	// Name names the source in logs and status, e.g. "docker" or "cgroup:/lxc".
	Name() string
}

// Send delivers ev on out, or gives up when ctx ends first and returns its
// error. Sources use it so a stalled consumer never outlives cancellation.
func Send(ctx context.Context, out chan<- Event, ev Event) error {
	select {
	case out <- ev:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
