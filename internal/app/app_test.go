package app

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/daemon"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// sampleConfig is the default configuration over the sample tree, with no
// state file and no API (Build binds nothing either way).
func sampleConfig(t *testing.T) config.Config {
	t.Helper()
	tr := hosttest.Sample(t)
	tr.Mkdir("sys/fs/cgroup/blkio/lxc.payload")
	cfg := config.Default()
	cfg.Paths = config.Paths{Sys: tr.Sys, Proc: tr.Proc}
	cfg.StateFile, cfg.Listen = "", ""
	return cfg
}

// A cgroup source needs no engine: Build opens no Docker client, and the
// pipeline's handler serves the daemon's metrics and the build info
// through the observer the caller wrapped.
func TestBuildCgroupSource(t *testing.T) {
	t.Parallel()
	cfg := sampleConfig(t)
	cfg.Source, cfg.CgroupParent = config.SourceCgroup, "/lxc.payload"
	var wrapped daemon.Observer
	pl, err := Build(context.Background(), Params{Config: cfg,
		Observe: func(next daemon.Observer) daemon.Observer { wrapped = next; return next }})
	if err != nil {
		t.Fatal(err)
	}
	defer pl.Close()
	if pl.engine != nil {
		t.Error("a cgroup source with the cgroup actuator opened a Docker client")
	}
	if got := pl.Source.Name(); !strings.Contains(got, "/lxc.payload") {
		t.Errorf("source %q, want the cgroup source over /lxc.payload", got)
	}
	if wrapped == nil {
		t.Error("Observe was not given the metrics observer")
	}
	if len(pl.Host.Devices.Actuated) == 0 {
		t.Error("no device shaped on the sample tree")
	}
	rec := httptest.NewRecorder()
	pl.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "ddiskqos_build_info") {
		t.Errorf("/metrics: %d, build info missing:\n%.400s", rec.Code, rec.Body.String())
	}
}

// Build refuses, naming the cause, a source it cannot make: auto with no
// engine answering, a cgroup parent that is not there.
func TestBuildRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  func(*config.Config, string)
		want string
	}{
		{"auto without engine", func(c *config.Config, dir string) {
			c.DockerHost = "unix://" + filepath.Join(dir, "no-docker.sock")
		}, "--source auto: the Docker engine does not answer"},
		{"parent missing", func(c *config.Config, _ string) {
			c.Source, c.CgroupParent = config.SourceCgroup, "/nosuch"
		}, "--cgroup-parent /nosuch"},
		{"no device", func(c *config.Config, _ string) {
			c.Source, c.CgroupParent, c.Devices = config.SourceCgroup, "/lxc.payload", []string{"nvme9n9"}
		}, "no block device to shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfg := sampleConfig(t)
			tc.set(&cfg, t.TempDir())
			pl, err := Build(context.Background(), Params{Config: cfg})
			if err == nil {
				pl.Close()
				t.Fatalf("Build succeeded, want an error saying %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want one saying %q", err, tc.want)
			}
		})
	}
}

// The throttle learns from the host's kernel release whether blk-throttle
// forgives a re-armed group's request debt (6.16+) or carries it (6.1).
func TestDaemonOptionsKernel(t *testing.T) {
	t.Parallel()
	cfg := sampleConfig(t)
	for release, want := range map[string]bool{"6.18.44-fc-v657": true, "6.1.0-56-amd64": false, "": false} {
		o := daemonOptions(cfg, Host{Kernel: release}, nil, slog.New(slog.DiscardHandler))
		if o.Actuator.Throttle.DebtForgiven != want {
			t.Errorf("kernel %q: Throttle.DebtForgiven %v, want %v", release, o.Actuator.Throttle.DebtForgiven, want)
		}
	}
	tr := hosttest.Sample(t)
	if err := os.MkdirAll(filepath.Join(tr.Proc, "sys", "kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tr.Proc, "sys", "kernel", "osrelease"), []byte("6.1.0-56-amd64\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	hst, err := ReadHost(host.Roots{Sys: tr.Sys, Proc: tr.Proc}, nil, mech.Params{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if hst.Kernel != "6.1.0-56-amd64" {
		t.Errorf("ReadHost: kernel %q, want the tree's osrelease", hst.Kernel)
	}
}
