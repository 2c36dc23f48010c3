package host

import (
	"fmt"
	"path/filepath"
	"strings"
)

// DockerEndpointFor is the engine to ask: host (a --docker-host flag),
// else env ($DOCKER_HOST), else DefaultDockerHost; nil for "off".
func DockerEndpointFor(host, env string) (*DockerEndpoint, error) {
	for _, h := range []string{host, env, DefaultDockerHost} {
		if h == "off" {
			return nil, nil
		}
		if h != "" {
			e, err := ParseDockerHost(h)
			if err != nil {
				return nil, err
			}
			return &e, nil
		}
	}
	return nil, nil
}

// ParseDeviceGlobs parses a comma-separated list of device name globs as
// the daemon's --devices takes them (sd*,nvme0n1); blanks are skipped.
func ParseDeviceGlobs(list string) ([]string, error) {
	var globs []string
	for g := range strings.SplitSeq(list, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if _, err := filepath.Match(g, ""); err != nil || strings.Contains(g, "/") {
			return nil, fmt.Errorf("bad pattern %q: want a device name glob as in /sys/block, such as sd* or nvme0n1", g)
		}
		globs = append(globs, g)
	}
	return globs, nil
}
