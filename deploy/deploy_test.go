// Package deploy holds the tests of the packaging in this directory: the
// systemd unit (systemd/), the container image (docker/) and the Kubernetes
// DaemonSet (kubernetes/). Each artifact is checked against the code it
// packages — the flags are parsed by `ddiskqos run`'s own parser, the probe
// path is asked of the daemon's own HTTP handler — and the unit and the
// image are exercised for real on this machine (systemd-analyze, the
// Docker engine, an empty capability set).
package deploy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/config"
)

// InstallPath is where the README's install step puts the binary, and the
// unit's ExecStart runs it.
const InstallPath = "/usr/local/bin/ddiskqos"

// ImageRef is the image the README builds and the DaemonSet runs.
const ImageRef = "ddiskqos:latest"

// readme returns the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatalf("read README: %v", err)
	}
	return string(b)
}

// installSection returns the README's "## Installing" section.
func installSection(t *testing.T) string {
	t.Helper()
	text := readme(t)
	_, rest, ok := strings.Cut(text, "\n## Installing\n")
	if !ok {
		t.Fatal(`README.md has no "## Installing" section`)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// parseRunArgs runs `ddiskqos run`'s own flag parser and validation over
// args (without "run"), starting nothing.
func parseRunArgs(t *testing.T, args []string) config.Config {
	t.Helper()
	cfg, _, err := config.FromArgs(args)
	if err != nil {
		t.Fatalf("ddiskqos run %s: refused by the flag parser: %v", strings.Join(args, " "), err)
	}
	return cfg
}
