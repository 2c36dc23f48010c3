package docker

import (
	"context"
	"errors"
	"fmt"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/client"

	"github.com/ddiskqos/ddiskqos/internal/source"
)

// ErrNoContainer means the engine knows no container by the name or id
// asked for.
var ErrNoContainer = errors.New("no such container")

// ErrNotRunning means the container exists but has no running process,
// hence no cgroup to read.
var ErrNotRunning = errors.New("container not running")

// Lookup finds one container by name or id (or a unique id prefix, as
// "docker inspect" takes them) and returns it as the Workload Run would
// report, its cgroup resolved the same way. An unknown container is an
// error wrapping ErrNoContainer, a stopped one ErrNotRunning; both name
// ref. The engine is Options.Engine, or one made from the environment.
func (s *Source) Lookup(ctx context.Context, ref string) (source.Workload, error) {
	if ref == "" {
		return source.Workload{}, fmt.Errorf("container %q: %w", ref, ErrNoContainer)
	}
	eng := s.engine
	if eng == nil {
		c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return source.Workload{}, fmt.Errorf("docker client: %w", err)
		}
		defer c.Close()
		eng = c
	}
	ci, err := eng.ContainerInspect(ctx, ref)
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return source.Workload{}, fmt.Errorf("container %q: %w", ref, ErrNoContainer)
		}
		return source.Workload{}, fmt.Errorf("container %q: inspect: %w", ref, err)
	}
	if ci.State == nil || !ci.State.Running || ci.State.Pid <= 0 {
		status := "unknown"
		if ci.State != nil {
			status = ci.State.Status
		}
		return source.Workload{}, fmt.Errorf("container %q (%.12s) is %s: %w", ref, ci.ID, status, ErrNotRunning)
	}
	info, err := eng.Info(ctx)
	if err != nil {
		return source.Workload{}, fmt.Errorf("container %q: engine info: %w", ref, err)
	}
	wl, err := s.workload(ci, info.CgroupDriver)
	if err != nil {
		return source.Workload{}, fmt.Errorf("container %q: %w", ref, err)
	}
	return wl, nil
}
