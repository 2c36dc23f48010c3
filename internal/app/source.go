package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/source"
	"github.com/ddiskqos/ddiskqos/internal/source/cgroupdir"
	dockersrc "github.com/ddiskqos/ddiskqos/internal/source/docker"
)

// DockerClient is a client of the Docker engine at host ("" means
// $DOCKER_HOST, else the default socket), its API version negotiated now
// when the engine answers.
func DockerClient(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("docker client for %s: %w", host, err)
	}
	// Negotiate the API version now, before the event stream and other
	// calls share the client; an engine that is down is no error here (the
	// client negotiates on its first request instead).
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	return cli, nil
}

// newSource builds the workload source cfg.Source names; "auto" is docker
// when the engine answers. engine returns the pipeline's one Docker client.
func newSource(ctx context.Context, cfg config.Config, hst Host, engine func() (*client.Client, error), log *slog.Logger) (source.Source, error) {
	kind := cfg.Source
	if kind == config.SourceAuto {
		cli, err := engine()
		if err == nil {
			pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			_, err = cli.Ping(pctx, client.PingOptions{})
			cancel()
		}
		if err != nil {
			return nil, fmt.Errorf("--source auto: the Docker engine does not answer (%v); --source docker waits for it (degraded on /healthz meanwhile); for LXC, systemd or Kubernetes hosts use --source cgroup --cgroup-parent PATH", err)
		}
		kind = config.SourceDocker
	}
	switch kind {
	case config.SourceDocker:
		cli, err := engine()
		if err != nil {
			return nil, err
		}
		return dockersrc.New(dockersrc.Options{Engine: cli, Layout: hst.Layout, ProcFS: hst.Roots.Proc, Logger: log})
	case config.SourceCgroup:
		h := hst.Hierarchy
		given := cfg.CgroupParent
		if given == "" && cfg.CgroupLayout == "lxc" {
			given = "/" // LXC 5 without lxc.cgroup.dir: lxc.payload.NAME at the root
		}
		parent, err := cgroupdir.ParentPath(h, given) // also /sys/fs/cgroup/blkio/x
		if err != nil {
			return nil, fmt.Errorf("--cgroup-parent: %w", err)
		}
		dir, err := h.Path(parent)
		if err != nil {
			return nil, fmt.Errorf("--cgroup-parent %s: %w", cfg.CgroupParent, err)
		}
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("--cgroup-parent %s: %s is not a cgroup directory of the %s hierarchy at %s",
				cfg.CgroupParent, dir, map[int]string{1: "v1 blkio", 2: "cgroup v2"}[h.Version], h.Mount)
		}
		var pins []cgroupdir.LevelGlob
		for _, p := range cfg.CgroupLevels {
			pins = append(pins, cgroupdir.LevelGlob{Glob: p.Glob, Level: p.Level})
		}
		return cgroupdir.New(cgroupdir.Options{Hierarchy: h, Parent: parent, Layout: cgroupdir.Layout(cfg.CgroupLayout),
			Exempt: cfg.CgroupExempt, Levels: pins, ExemptGuaranteed: cfg.CgroupExemptGuaranteed,
			KubeletLogs: cfg.CgroupKubeletLogs, KubeletPods: cfg.CgroupKubeletPods, Logger: log})
	}
	return nil, fmt.Errorf("source %q: want auto, docker or cgroup", kind)
}
