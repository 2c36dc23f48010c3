package config

import (
	"reflect"
)

// liveKeys are the keys whose new value the running daemon takes over on
// reload (`ddiskqos run` applies each: the policy's through
// daemon.Reconfigure, interval through daemon.SetInterval, log.level
// through a slog.LevelVar). Every other key is read once at start: the
// source and its connection (source, cgroup_parent, docker_host), what is
// bound or opened (listen, state_file, paths), how and where values are
// written (actuator, dry_run, throttle_shares, throttle_min,
// throttle_burst, throttle_reads, throttle_with_weights, work_conserving, level_limits, reassert, devices), whether
// BPF is loaded (latency) and the log
// handler (log.format).
var liveKeys = map[string]bool{
	"interval":     true,
	"thresholds":   true,
	"weights":      true,
	"boost_after":  true,
	"policy":       true,
	"usage_window": true,
	"log.level":    true,
}

// Diff lists the keys whose values differ between old and new, in the
// order of the Config fields: live are those the daemon can apply while it
// runs, restartNeeded those that only take effect after a restart (the
// daemon should log them and keep running with the old values). Empty
// and nil lists are equal.
func Diff(old, new Config) (live []string, restartNeeded []string) {
	for _, key := range diffValues(reflect.ValueOf(old), reflect.ValueOf(new), "") {
		if liveKeys[key] {
			live = append(live, key)
		} else {
			restartNeeded = append(restartNeeded, key)
		}
	}
	return live, restartNeeded
}

func diffValues(a, b reflect.Value, prefix string) []string {
	var keys []string
	t := a.Type()
	for i := range t.NumField() {
		name := yamlKey(t.Field(i))
		if name == "" {
			continue
		}
		key := join(prefix, name)
		fa, fb := a.Field(i), b.Field(i)
		switch {
		case fa.Kind() == reflect.Struct:
			keys = append(keys, diffValues(fa, fb, key)...)
		case fa.Kind() == reflect.Slice && fa.Len() == 0 && fb.Len() == 0:
		case !reflect.DeepEqual(fa.Interface(), fb.Interface()):
			keys = append(keys, key)
		}
	}
	return keys
}

// ApplyLive returns running with the live keys (see Diff) taken from next:
// the configuration in force after a reload that applied them. Keys that
// need a restart keep their running values, so a later reload names them
// again until the daemon restarts.
func ApplyLive(running, next Config) Config {
	out := running.clone()
	out.Interval = next.Interval
	out.Thresholds = append([]Size(nil), next.Thresholds...)
	out.Weights = append([]uint16(nil), next.Weights...)
	out.BoostAfter = next.BoostAfter
	out.PolicyMode, out.UsageWindow = next.PolicyMode, next.UsageWindow
	out.Log.Level = next.Log.Level
	return out
}
