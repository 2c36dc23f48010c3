package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// DefaultDockerHost is where the engine listens unless DOCKER_HOST says
// otherwise.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// Engine is what the Docker engine says about itself.
//
// It is read with two plain GETs of the Engine API instead of Docker's Go
// SDK: for /version and /info the SDK (github.com/moby/moby/client) adds
// some 70 packages from 20 modules (OpenTelemetry among them) and more than
// a megabyte to the binary. Where internal/source/docker links the SDK
// into the same binary that size is shared; what remains is that this package stays standard
// library only, so everything importing host (the controller, tests, tools)
// does not pull the SDK in. The unversioned paths answer in the engine's own
// API version, so no negotiation is needed, and both exist since API 1.12.
type Engine struct {
	Host          string `json:"host"`
	Reachable     bool   `json:"reachable"`
	Version       string `json:"version,omitempty"`
	APIVersion    string `json:"api_version,omitempty"`
	CgroupDriver  string `json:"cgroup_driver,omitempty"`  // "cgroupfs" or "systemd"
	CgroupVersion string `json:"cgroup_version,omitempty"` // "1" or "2" (API >= 1.40)
	// StorageDriver is /info's Driver: overlay2, fuse-overlayfs, vfs, ...
	StorageDriver string `json:"storage_driver,omitempty"`
	// RootDir is /info's DockerRootDir, e.g. /var/lib/docker: where image
	// layers, container filesystems and volumes live.
	RootDir string `json:"root_dir,omitempty"`
	Error   string `json:"error,omitempty"`
}

// DockerEndpoint is a parsed DOCKER_HOST.
type DockerEndpoint struct {
	Host   string // as given
	Socket string // unix socket path, or ""
	Base   string // http base URL
}

// ParseDockerHost accepts unix:///path, tcp://host:port, http://host:port
// and https://host:port.
func ParseDockerHost(host string) (DockerEndpoint, error) {
	u, err := url.Parse(host)
	if err != nil {
		return DockerEndpoint{}, fmt.Errorf("docker host %q: %w", host, err)
	}
	switch u.Scheme {
	case "unix":
		if u.Path == "" {
			return DockerEndpoint{}, fmt.Errorf("docker host %q: unix socket path is empty", host)
		}
		return DockerEndpoint{Host: host, Socket: u.Path, Base: "http://docker"}, nil
	case "tcp", "http", "https":
		if u.Host == "" {
			return DockerEndpoint{}, fmt.Errorf("docker host %q: no host:port", host)
		}
		scheme := u.Scheme
		if scheme == "tcp" {
			scheme = "http"
		}
		return DockerEndpoint{Host: host, Base: scheme + "://" + u.Host}, nil
	}
	return DockerEndpoint{}, fmt.Errorf("docker host %q: scheme must be unix, tcp, http or https", host)
}

// ProbeEngine asks the engine at ep for /version and /info. An engine that
// cannot be reached is reported in Engine.Error, not as a failure: the
// cgroup-parent source works without it.
func ProbeEngine(ctx context.Context, ep DockerEndpoint) Engine {
	e := Engine{Host: ep.Host}
	tr := &http.Transport{DisableKeepAlives: true}
	if ep.Socket != "" {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", ep.Socket)
		}
	}
	c := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	defer tr.CloseIdleConnections()

	var v struct{ Version, APIVersion string }
	if err := getJSON(ctx, c, ep.Base+"/version", &v); err != nil {
		e.Error = err.Error()
		return e
	}
	e.Reachable, e.Version, e.APIVersion = true, v.Version, v.APIVersion
	var info struct{ CgroupDriver, CgroupVersion, Driver, DockerRootDir string }
	if err := getJSON(ctx, c, ep.Base+"/info", &info); err != nil {
		e.Error = err.Error()
		return e
	}
	e.CgroupDriver, e.CgroupVersion = info.CgroupDriver, info.CgroupVersion
	e.StorageDriver, e.RootDir = info.Driver, info.DockerRootDir
	return e
}

func getJSON(ctx context.Context, c *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			return fmt.Errorf("GET %s: %w", req.URL.Path, op)
		}
		return fmt.Errorf("GET %s: %w", req.URL.Path, err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, 1<<20)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(body, 200))
		return fmt.Errorf("GET %s: %s: %s", req.URL.Path, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", req.URL.Path, err)
	}
	return nil
}
