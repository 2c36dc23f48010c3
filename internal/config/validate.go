package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/policy"
)

// Validate returns nil for a usable Config, otherwise the errors.Join of a
// *KeyError for every problem, each naming the config-file key and the bad
// value. The policy's own rules (allowances > 0, weights in 10..1000 and not
// increasing, boost_after > 0) come from policy.Config.Validate.
func (c Config) Validate() error {
	var errs []error
	bad := func(key string, value any, format string, a ...any) {
		errs = append(errs, &KeyError{Key: key, Value: value, Msg: fmt.Sprintf(format, a...)})
	}

	switch c.Source {
	case SourceAuto, SourceDocker, SourceCgroup:
	default:
		bad("source", c.Source, "must be auto, docker or cgroup")
	}
	switch {
	case c.Source == SourceCgroup && c.CgroupParent == "" && c.CgroupLayout != "lxc":
		bad("cgroup_parent", c.CgroupParent, "required with source cgroup: the cgroup whose children are the workloads, "+
			"such as /system.slice (systemd services); LXC needs none with cgroup_layout lxc")
	case c.Source != SourceCgroup && c.CgroupParent != "":
		bad("cgroup_parent", c.CgroupParent, "only used with source cgroup (source is %q); "+
			"set source: cgroup, or remove cgroup_parent", c.Source)
	case c.CgroupParent == "/" && (c.CgroupLayout == "lxc" || c.CgroupLayout == "auto"):
		// LXC 5's containers are lxc.payload.NAME at the root (v1)
	case c.CgroupParent != "":
		if msg := cgroupPathProblem(c.CgroupParent); msg != "" {
			bad("cgroup_parent", c.CgroupParent, "%s", msg)
		}
	}
	cgroupOnly := func(key string, value any) {
		bad(key, value, "only used with source cgroup (source is %q); set source: cgroup, or remove %s", c.Source, key)
	}
	switch c.CgroupLayout {
	case "auto", "children", "kubepods", "lxc", "podman":
		if c.Source != SourceCgroup && c.CgroupLayout != "auto" {
			cgroupOnly("cgroup_layout", c.CgroupLayout)
		}
	default:
		bad("cgroup_layout", c.CgroupLayout, "must be auto, children, kubepods, lxc or podman")
	}
	if c.Source != SourceCgroup && len(c.CgroupExempt) > 0 {
		cgroupOnly("cgroup_exempt", c.CgroupExempt)
	}
	if c.Source != SourceCgroup && len(c.CgroupLevels) > 0 {
		cgroupOnly("cgroup_levels", c.CgroupLevels)
	}
	if c.Source != SourceCgroup && c.CgroupExemptGuaranteed {
		cgroupOnly("cgroup_exempt_guaranteed", c.CgroupExemptGuaranteed)
	}
	for i, g := range c.CgroupExempt {
		if msg := nameGlobProblem(g); msg != "" {
			bad(fmt.Sprintf("cgroup_exempt[%d]", i), g, "%s", msg)
		}
	}
	for i, p := range c.CgroupLevels { // decoded already; checked again when made in code
		if msg := p.problem(strconv.Itoa(p.Level)); msg != "" {
			bad(fmt.Sprintf("cgroup_levels[%d]", i), p.String(), "%s", msg)
		}
	}
	if c.DockerHost != "" {
		if msg := dockerHostProblem(c.DockerHost); msg != "" {
			bad("docker_host", c.DockerHost, "%s", msg)
		}
	}

	if c.Interval < MinInterval {
		bad("interval", c.Interval, "must be at least %s: sampling thousands of cgroups faster costs more than it controls", MinInterval)
	}
	if n := len(c.Thresholds); n != policy.NumLevels {
		bad("thresholds", c.Thresholds, "want %d sizes, one per level, got %d", policy.NumLevels, n)
	}
	if n := len(c.Weights); n != policy.NumLevels {
		bad("weights", c.Weights, "want %d weights, one per level, got %d", policy.NumLevels, n)
	}
	errs = append(errs, c.policyErrors()...)
	if c.BoostAfter > 0 && c.BoostAfter <= c.Interval {
		bad("boost_after", c.BoostAfter, "must be longer than interval (%s): the time at level 4 is only seen "+
			"once per interval, so a shorter boost_after would boost a workload at every sample and level 4 "+
			"would never hold", c.Interval)
	}

	switch c.Actuator {
	case ActuatorCgroup:
	case ActuatorDocker:
		if c.Source == SourceCgroup {
			bad("actuator", c.Actuator, "needs a Docker source (source docker or auto), but source is cgroup; "+
				"use actuator: cgroup")
		}
	default:
		bad("actuator", c.Actuator, "must be cgroup or docker")
	}
	if n := len(c.ThrottleShares); n != policy.NumLevels {
		bad("throttle_shares", c.ThrottleShares, "want %d fractions, one per level, got %d", policy.NumLevels, n)
	}
	for i, s := range c.ThrottleShares {
		key := fmt.Sprintf("throttle_shares[%d]", i)
		switch {
		case !(s > 0 && s <= 1): // also catches NaN
			bad(key, s, "level %d share must be in (0, 1]: a fraction of the device's peak bandwidth", i+1)
		case i == 0 && s != 1:
			bad(key, s, "level 1 share must be 1: level 1 is never capped")
		case i > 0 && c.ThrottleShares[i-1] > 0 && c.ThrottleShares[i-1] <= 1 && s > c.ThrottleShares[i-1]:
			bad(key, s, "level %d share is greater than level %d share %v; shares must not increase as levels drop",
				i+1, i, c.ThrottleShares[i-1])
		}
	}
	if c.ThrottleMin == 0 {
		bad("throttle_min", c.ThrottleMin, "must be > 0: a cap of 0 bytes/s would stop a workload's I/O")
	}
	if c.ThrottleReads < 100 || c.ThrottleReads > 100000 {
		bad("throttle_reads", c.ThrottleReads, "must be 100..100000 counter reads per second and device")
	}
	if c.ThrottleBurst < 0 {
		bad("throttle_burst", c.ThrottleBurst, "must be 0 (no bound) or a positive duration such as 5ms")
	}
	if n := len(c.LevelLimits); n != 0 && n != policy.NumLevels {
		bad("level_limits", c.LevelLimits, "must list %d caps, one per level (0: none), or none", policy.NumLevels)
	} else if n > 0 && c.LevelLimits[0] != 0 {
		bad("level_limits[0]", c.LevelLimits[0], "must be 0: level 1 is never capped")
	}
	for i, l := range c.LevelLimits {
		if l != 0 && l < 4096 {
			bad(fmt.Sprintf("level_limits[%d]", i), l, "must be 0 (none) or at least 4KiB per second")
		}
	}
	if c.Reassert != 0 && c.Reassert < c.Interval {
		bad("reassert", c.Reassert, "must be 0 (never) or at least interval (%s): values are only written once per interval", c.Interval)
	}
	for i, g := range c.Devices {
		key := fmt.Sprintf("devices[%d]", i)
		switch {
		case g == "":
			bad(key, g, "empty pattern; leave devices empty for automatic")
		case strings.Contains(g, "/"):
			bad(key, g, "want a device name pattern as in /sys/block, such as sd* or nvme0n1, not a path")
		default:
			if _, err := path.Match(g, ""); err != nil {
				bad(key, g, "bad glob pattern: %v", err)
			}
		}
	}

	if c.Listen != "" {
		if msg := listenProblem(c.Listen); msg != "" {
			bad("listen", c.Listen, "%s", msg)
		}
	}
	if msg := absPathProblem(c.StateFile); msg != "" {
		bad("state_file", c.StateFile, "%s", msg)
	}
	if msg := absPathProblem(c.Paths.Sys); msg != "" {
		bad("paths.sys", c.Paths.Sys, "%s", msg)
	}
	if msg := absPathProblem(c.Paths.Proc); msg != "" {
		bad("paths.proc", c.Paths.Proc, "%s", msg)
	}
	models := map[string]int{}
	for i, m := range c.Health.Models {
		key := fmt.Sprintf("health.models[%d]", i)
		if first, dup := models[m.Device]; dup {
			bad(key, m.String(), "a second model of device %s (the first is health.models[%d]): one per device", m.Device, first)
		}
		models[m.Device] = i
	}
	if c.Health.DStateWorkloads < 0 {
		bad("health.dstate_workloads", c.Health.DStateWorkloads, "must be 0 (off) or more")
	}
	if c.Health.SyncProbe != "" {
		if msg := absPathProblem(c.Health.SyncProbe); msg != "" {
			bad("health.sync_probe", c.Health.SyncProbe, "%s", msg)
		}
	}
	if c.Health.SyncProbeInterval < 0 {
		bad("health.sync_probe_interval", c.Health.SyncProbeInterval, "must be 0 (every interval) or positive")
	}
	hold, from := c.Health.BurstHoldBelow, c.Health.BurstHoldFromLevel
	switch {
	case !(hold >= 0 && hold < 1): // also catches NaN
		bad("health.burst_hold_below", hold, "must be 0 (off) or a fraction of the burst bucket below 1, such as 0.2")
	case hold > 0 && len(c.Health.Models) == 0:
		bad("health.burst_hold_below", hold, "needs a device's burst model (health.models): the hold holds to the model's baseline")
	}
	if from < 2 || from > policy.NumLevels {
		bad("health.burst_hold_from_level", from, "must be 2..%d: the best level held (level 1 is never held)", policy.NumLevels)
	} else if hold > 0 && len(c.ThrottleShares) == policy.NumLevels {
		for l := from; l <= policy.NumLevels; l++ {
			if c.ThrottleShares[l-1] == 1 {
				bad("health.burst_hold_from_level", from, "level %d is held but throttle_shares[%d] is 1: the throttle leaves that level alone; "+
					"give it a share below 1 or hold from level %d", l, l-1, l+1)
				break
			}
		}
	}
	if _, err := ParseLatencyMode(c.Latency.String()); err != nil {
		bad("latency", string(c.Latency), "%s", err.Error())
	}
	if _, err := ParseLogLevel(c.Log.Level.String()); err != nil {
		bad("log.level", c.Log.Level, "%s", err.Error())
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", c.Log.Format, "must be text or json")
	}
	return errors.Join(errs...)
}

// policyErrors runs policy.Config.Validate and renames its fields to
// config-file keys. A list without NumLevels entries (reported already) is
// replaced by the default so it gives no second error.
func (c Config) policyErrors() []error {
	pc := policy.DefaultConfig()
	if len(c.Thresholds) == policy.NumLevels {
		for i, t := range c.Thresholds {
			pc.Allowances[i] = uint64(t)
		}
	}
	if len(c.Weights) == policy.NumLevels {
		copy(pc.Weights[:], c.Weights)
	}
	pc.BoostAfter = c.BoostAfter
	pc.Window = c.UsageWindow
	pc.Mode = policy.Mode(c.PolicyMode)
	var errs []error
	err := pc.Validate()
	if err == nil {
		return errs
	}
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var fe *policy.FieldError
		if !errors.As(e, &fe) {
			errs = append(errs, e)
			continue
		}
		ke := &KeyError{Value: fe.Value, Msg: fe.Msg}
		switch name, idx, _ := strings.Cut(fe.Field, "["); name {
		case "Allowances":
			ke.Key = "thresholds[" + idx
			if v, ok := fe.Value.(uint64); ok {
				ke.Value = Size(v)
			}
		case "Weights":
			ke.Key = "weights[" + idx
		case "BoostAfter":
			ke.Key = "boost_after"
		case "Window":
			ke.Key = "usage_window"
		case "Mode":
			ke.Key, ke.Value = "policy", c.PolicyMode
		default:
			ke.Key = fe.Field
		}
		errs = append(errs, ke)
	}
	return errs
}

// cgroupPathProblem checks a cgroup path given relative to the hierarchy's
// mount: absolute, clean (so it cannot walk out of the tree) and not the
// root itself.
func cgroupPathProblem(p string) string {
	switch {
	case !strings.HasPrefix(p, "/"):
		return "must be an absolute cgroup path, as in /proc/PID/cgroup, such as /lxc.payload"
	case hasDotDot(p):
		return `must not contain ".."`
	case path.Clean(p) != p:
		return fmt.Sprintf("must be a clean path (%s)", path.Clean(p))
	case p == "/":
		return "must be below the root cgroup: the root's children include init.scope and the system's own services " +
			"(the root is allowed with cgroup_layout lxc, where only lxc.payload.* are workloads)"
	}
	return ""
}

// nameGlobProblem checks a glob on workload names of the cgroup source.
func nameGlobProblem(g string) string {
	if g == "" {
		return "empty pattern"
	}
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Sprintf("bad glob pattern %q: %v", g, err)
	}
	return ""
}

func absPathProblem(p string) string {
	switch {
	case p == "":
		return "must not be empty"
	case !strings.HasPrefix(p, "/"):
		return "must be an absolute path"
	case hasDotDot(p):
		return `must not contain ".."`
	case path.Clean(p) != p:
		return fmt.Sprintf("must be a clean path (%s)", path.Clean(p))
	}
	return ""
}

func hasDotDot(p string) bool {
	for _, e := range strings.Split(p, "/") {
		if e == ".." {
			return true
		}
	}
	return false
}

// listenProblem checks a host:port to listen on. The host may be empty (all
// addresses); the port must be a number, not a service name, so the address
// means the same on every host.
func listenProblem(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "want host:port, such as 127.0.0.1:9191 or :9191; an empty string turns the API off"
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > math.MaxUint16 {
		return "port must be a number from 1 to 65535"
	}
	return ""
}

// dockerHostProblem accepts what the Engine API clients of this module
// accept: unix:///path, tcp://host:port, http(s)://host:port.
func dockerHostProblem(h string) string {
	u, err := url.Parse(h)
	if err != nil {
		return "want unix:///path/to/docker.sock or tcp://host:port: " + err.Error()
	}
	switch u.Scheme {
	case "unix":
		if !strings.HasPrefix(u.Path, "/") {
			return "want unix:///absolute/path/to/docker.sock"
		}
	case "tcp", "http", "https":
		if u.Host == "" {
			return "want " + u.Scheme + "://host:port"
		}
	default:
		return "scheme must be unix, tcp, http or https"
	}
	return ""
}
