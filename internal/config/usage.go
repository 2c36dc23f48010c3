package config

import (
	"fmt"
	"strings"
)

const usageHead = `usage: ddiskqos run [--config FILE] [flags]

Runs the daemon. Every interval it reads the I/O of every workload (a Docker
container, or a child cgroup of --cgroup-parent), moves a workload that did
its level's allowance of I/O down one of four levels, boosts it back to
level 1 after --boost-after at level 4, and gives each level its I/O weight
(on a throttle-only disk, a bandwidth cap) through the workload's cgroup.

Configuration comes in layers; a later one overrides an earlier one:
  1. the built-in defaults shown below
  2. $DOCKER_HOST, for docker_host
  3. the YAML file given with --config
  4. the flags given on the command line (only those; a flag left out does
     not reset the file's value)
The result is checked as a whole; every error names the key, the bad value
and where it came from (FILE:LINE, --flag or $DOCKER_HOST). On SIGHUP the
daemon reads the file again and applies the same flags over it; if the file
has an error the running configuration is kept.

Flags (each sets the config-file key in brackets):
`

const usageTail = `
Config file:
  YAML, one key per flag, with the key names in brackets above. Any key may
  be left out and keeps its default; an unknown key or a value of the wrong
  type is an error. Lists are YAML lists; sizes are bytes, as a plain
  integer or with a unit (4k, 8MiB, 1GiB are powers of 1024; 100MB is
  10^8); durations need a unit (500ms, 1s, 2m). For example:

    source: cgroup
    cgroup_parent: /lxc.payload
    interval: 500ms
    thresholds: [4MiB, 16MiB, 64MiB, 256MiB]
    weights: [1000, 500, 250, 100]
    devices: ["sd*", "nvme0n1"]
    listen: ""                     # no HTTP API
    paths: {sys: /host/sys, proc: /host/proc}
    log: {level: debug, format: json}

  The reference file, every key documented with its default, is
  internal/config/default.yaml in the ddiskqos source.

Examples:
  Docker host: containers of the engine at $DOCKER_HOST, else
  /var/run/docker.sock:
    ddiskqos run
    ddiskqos run --dry-run --log-level debug      # watch the levels first

  LXC host (every container is a child of /lxc.payload):
    ddiskqos run --source cgroup --cgroup-parent /lxc.payload

  systemd host (every service is a workload), journald left alone and
  the database pinned at level 1:
    ddiskqos run --source cgroup --cgroup-parent /system.slice \
      --cgroup-exempt 'systemd-journald.service' --cgroup-levels 'postgresql*=1'

  Kubernetes node (every container of every pod; the layout is found from
  the name kubepods.slice), Guaranteed pods left alone:
    ddiskqos run --source cgroup --cgroup-parent /kubepods.slice \
      --cgroup-exempt-guaranteed

  A config file, with one key overridden for this run:
    ddiskqos run --config /etc/ddiskqos/config.yaml --interval 500ms
`

// Usage returns the help text of "ddiskqos run": every flag with its
// default and config-file key, the layers and their precedence, the config
// file format and examples for a Docker, an LXC and a systemd host.
func Usage() string {
	var b strings.Builder
	b.WriteString(usageHead)
	def := Default()
	writeFlag(&b, "--config FILE", "", "",
		"YAML config file read before the flags are applied; without it the built-in defaults are used")
	for _, d := range flagDefs {
		head := "--" + d.name
		if d.arg != "" {
			head += " " + d.arg
		}
		v := d.get(&def)
		switch {
		case d.key == "docker_host":
			v = "$DOCKER_HOST, else " + DefaultDockerHost
		case v == "":
			v = `""`
		}
		writeFlag(&b, head, d.key, v, d.help)
	}
	b.WriteString(usageTail)
	return b.String()
}

func writeFlag(b *strings.Builder, head, key, def, help string) {
	fmt.Fprintf(b, "  %s", head)
	if key != "" {
		fmt.Fprintf(b, "  [%s]", key)
	}
	b.WriteString("\n")
	if def != "" && !strings.Contains(help, "(default") {
		help += " (default " + def + ")"
	}
	for _, line := range wrap(help, 70) {
		fmt.Fprintf(b, "        %s\n", line)
	}
}

// wrap splits s into lines of at most width bytes, at spaces.
func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
