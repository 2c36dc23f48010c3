package config

import (
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"
)

// Every rule, with the key and the value its message must name.
func TestValidate(t *testing.T) {
	t.Parallel()
	type want struct{ key, text string } // text: a substring of Error()
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   []want // nil: valid
	}{
		{"default", func(*Config) {}, nil},
		{"source cgroup with parent", func(c *Config) { c.Source, c.CgroupParent = SourceCgroup, "/lxc.payload" }, nil},
		{"source docker", func(c *Config) { c.Source = SourceDocker }, nil},
		{"docker actuator with auto", func(c *Config) { c.Actuator = ActuatorDocker }, nil},
		{"listen off", func(c *Config) { c.Listen = "" }, nil},
		{"listen all addresses", func(c *Config) { c.Listen = ":9191" }, nil},
		{"listen ipv6", func(c *Config) { c.Listen = "[::1]:9191" }, nil},
		{"reassert never", func(c *Config) { c.Reassert = 0 }, nil},
		{"devices", func(c *Config) { c.Devices = []string{"sd*", "nvme[01]n1", "vda"} }, nil},
		{"equal shares and weights", func(c *Config) {
			c.ThrottleShares = []float64{1, 1, 0.5, 0.5}
			c.Weights = []uint16{500, 500, 500, 500}
		}, nil},
		{"docker hosts", func(c *Config) { c.DockerHost = "tcp://10.0.0.1:2375" }, nil},

		{"cgroup pins and exemptions", func(c *Config) {
			c.Source, c.CgroupParent, c.CgroupLayout = SourceCgroup, "/kubepods.slice", "kubepods"
			c.CgroupExempt, c.CgroupLevels, c.CgroupExemptGuaranteed = []string{"system-*", "pod*/*"}, []CgroupPin{{"db-*", 1}, {"*", 4}}, true
		}, nil},
		{"parent as a path under the mount", func(c *Config) { c.Source, c.CgroupParent = SourceCgroup, "/sys/fs/cgroup/blkio/lxc" }, nil},
		{"bad cgroup layout", func(c *Config) { c.Source, c.CgroupParent, c.CgroupLayout = SourceCgroup, "/lxc", "flat" },
			[]want{{"cgroup_layout", `cgroup_layout="flat": must be auto, children, kubepods, lxc or podman`}}},
		{"bad cgroup globs", func(c *Config) {
			c.Source, c.CgroupParent = SourceCgroup, "/lxc"
			c.CgroupExempt = []string{"ok-*", "sys[tem-*", ""}
			c.CgroupLevels = []CgroupPin{{"db-*", 1}, {"", 1}, {"[", 2}, {"batch-*", 5}, {"x", 0}}
		}, []want{
			{"cgroup_exempt[1]", `cgroup_exempt[1]="sys[tem-*": bad glob pattern "sys[tem-*": syntax error in pattern`},
			{"cgroup_exempt[2]", `cgroup_exempt[2]="": empty pattern`},
			{"cgroup_levels[1]", `cgroup_levels[1]="=1": empty pattern`},
			{"cgroup_levels[2]", `cgroup_levels[2]="[=2": bad glob pattern "["`},
			{"cgroup_levels[3]", `cgroup_levels[3]="batch-*=5": level "5" of pattern "batch-*" must be 1 to 4`},
			{"cgroup_levels[4]", `cgroup_levels[4]="x=0": level "0" of pattern "x" must be 1 to 4`},
		}},
		{"cgroup keys without source cgroup", func(c *Config) {
			c.CgroupLayout, c.CgroupExempt, c.CgroupLevels, c.CgroupExemptGuaranteed = "kubepods", []string{"a"}, []CgroupPin{{"b", 1}}, true
		}, []want{
			{"cgroup_layout", `cgroup_layout="kubepods": only used with source cgroup (source is "auto"); set source: cgroup, or remove cgroup_layout`},
			{"cgroup_exempt", `only used with source cgroup`},
			{"cgroup_levels", `only used with source cgroup`},
			{"cgroup_exempt_guaranteed", `cgroup_exempt_guaranteed=true: only used with source cgroup`},
		}},

		{"bad source", func(c *Config) { c.Source = "podman" },
			[]want{{"source", `source="podman": must be auto, docker or cgroup`}}},
		{"cgroup without parent", func(c *Config) { c.Source = SourceCgroup },
			[]want{{"cgroup_parent", `cgroup_parent="": required with source cgroup`}}},
		{"parent without cgroup", func(c *Config) { c.CgroupParent = "/lxc.payload" },
			[]want{{"cgroup_parent", `cgroup_parent="/lxc.payload": only used with source cgroup (source is "auto")`}}},
		{"relative parent", func(c *Config) { c.Source, c.CgroupParent = SourceCgroup, "lxc.payload" },
			[]want{{"cgroup_parent", `cgroup_parent="lxc.payload": must be an absolute cgroup path`}}},
		{"parent with dotdot", func(c *Config) { c.Source, c.CgroupParent = SourceCgroup, "/lxc.payload/../system.slice" },
			[]want{{"cgroup_parent", `cgroup_parent="/lxc.payload/../system.slice": must not contain ".."`}}},
		{"unclean parent", func(c *Config) { c.Source, c.CgroupParent = SourceCgroup, "/lxc.payload/" },
			[]want{{"cgroup_parent", `cgroup_parent="/lxc.payload/": must be a clean path (/lxc.payload)`}}},
		{"root parent", func(c *Config) { c.Source, c.CgroupParent, c.CgroupLayout = SourceCgroup, "/", "children" },
			[]want{{"cgroup_parent", `cgroup_parent="/": must be below the root cgroup`}}},
		{"lxc needs no parent", func(c *Config) { c.Source, c.CgroupLayout = SourceCgroup, "lxc" }, nil},
		{"lxc at the root", func(c *Config) { c.Source, c.CgroupParent, c.CgroupLayout = SourceCgroup, "/", "lxc" }, nil},
		{"bad docker host", func(c *Config) { c.DockerHost = "/var/run/docker.sock" },
			[]want{{"docker_host", `docker_host="/var/run/docker.sock": scheme must be unix, tcp, http or https`}}},
		{"relative unix socket", func(c *Config) { c.DockerHost = "unix://docker.sock" },
			[]want{{"docker_host", `docker_host="unix://docker.sock": want unix:///absolute/path`}}},
		{"tcp without host", func(c *Config) { c.DockerHost = "tcp://" },
			[]want{{"docker_host", `docker_host="tcp://": want tcp://host:port`}}},
		{"short interval", func(c *Config) { c.Interval = 10 * time.Millisecond },
			[]want{{"interval", "interval=10ms: must be at least 50ms"}}},
		{"three thresholds", func(c *Config) { c.Thresholds = c.Thresholds[:3] },
			[]want{{"thresholds", "thresholds=[2MiB 8MiB 32MiB]: want 4 sizes, one per level, got 3"}}},
		{"zero threshold", func(c *Config) { c.Thresholds[2] = 0 },
			[]want{{"thresholds[2]", "thresholds[2]=0: level 3 allowance must be > 0 bytes"}}},
		{"five weights", func(c *Config) { c.Weights = append(c.Weights, 50) },
			[]want{{"weights", "weights=[1000 500 250 100 50]: want 4 weights, one per level, got 5"}}},
		{"weight out of range", func(c *Config) { c.Weights[3] = 5 },
			[]want{{"weights[3]", "weights[3]=5: level 4 weight must be in 10..1000"}}},
		{"weights increase", func(c *Config) { c.Weights[2] = 600 },
			[]want{{"weights[2]", "weights[2]=600: level 3 weight is greater than level 2 weight 500"}}},
		{"unknown policy", func(c *Config) { c.PolicyMode = 7 },
			[]want{{"policy", `policy=invalid(7): want recent or paper`}}},
		{"zero usage_window", func(c *Config) { c.UsageWindow = 0 },
			[]want{{"usage_window", "usage_window=0s: must be > 0 with the recent policy"}}},
		{"zero usage_window with the paper policy", func(c *Config) { c.PolicyMode, c.UsageWindow = modePaper, 0 }, nil},
		{"zero boost_after", func(c *Config) { c.BoostAfter = 0 },
			[]want{{"boost_after", "boost_after=0s: must be > 0"}}},
		{"boost_after not above interval", func(c *Config) { c.BoostAfter = time.Second },
			[]want{{"boost_after", "boost_after=1s: must be longer than interval (1s)"}}},
		{"bad actuator", func(c *Config) { c.Actuator = "blkio" },
			[]want{{"actuator", `actuator="blkio": must be cgroup or docker`}}},
		{"docker actuator with cgroup source", func(c *Config) {
			c.Source, c.CgroupParent, c.Actuator = SourceCgroup, "/lxc.payload", ActuatorDocker
		}, []want{{"actuator", `actuator="docker": needs a Docker source`}}},
		{"three shares", func(c *Config) { c.ThrottleShares = []float64{1, 0.5, 0.25} },
			[]want{{"throttle_shares", "throttle_shares=[1 0.5 0.25]: want 4 fractions, one per level, got 3"}}},
		{"level 1 capped", func(c *Config) { c.ThrottleShares[0] = 0.9 },
			[]want{{"throttle_shares[0]", "throttle_shares[0]=0.9: level 1 share must be 1"}}},
		{"share zero", func(c *Config) { c.ThrottleShares[3] = 0 },
			[]want{{"throttle_shares[3]", "throttle_shares[3]=0: level 4 share must be in (0, 1]"}}},
		{"share above one", func(c *Config) { c.ThrottleShares[1] = 1.5 },
			[]want{{"throttle_shares[1]", "throttle_shares[1]=1.5: level 2 share must be in (0, 1]"}}},
		{"share NaN", func(c *Config) { c.ThrottleShares[2] = math.NaN() },
			[]want{{"throttle_shares[2]", "throttle_shares[2]=NaN: level 3 share must be in (0, 1]"}}},
		{"shares increase", func(c *Config) { c.ThrottleShares[3] = 0.5 },
			[]want{{"throttle_shares[3]", "throttle_shares[3]=0.5: level 4 share is greater than level 3 share 0.45"}}},
		{"unknown latency", func(c *Config) { c.Latency = "on" },
			[]want{{"latency", `latency="on": want auto (the eBPF latency sensor where the kernel and privileges allow) or off (never load BPF)`}}},
		{"zero throttle_min", func(c *Config) { c.ThrottleMin = 0 },
			[]want{{"throttle_min", "throttle_min=0: must be > 0"}}},
		{"throttle_reads too low", func(c *Config) { c.ThrottleReads = 10 },
			[]want{{"throttle_reads", "throttle_reads=10: must be 100..100000"}}},
		{"level_limits of 3 levels", func(c *Config) { c.LevelLimits = []Size{0, 0, MiB} },
			[]want{{"level_limits", "must list 4 caps"}}},
		{"level_limits capping level 1", func(c *Config) { c.LevelLimits = []Size{MiB, 0, 0, MiB} },
			[]want{{"level_limits[0]", "level 1 is never capped"}}},
		{"level_limits too low", func(c *Config) { c.LevelLimits = []Size{0, 0, 0, 100} },
			[]want{{"level_limits[3]", "at least 4KiB"}}},
		{"reassert below interval", func(c *Config) { c.Reassert = 100 * time.Millisecond },
			[]want{{"reassert", "reassert=100ms: must be 0 (never) or at least interval (1s)"}}},
		{"empty device", func(c *Config) { c.Devices = []string{"sda", ""} },
			[]want{{"devices[1]", `devices[1]="": empty pattern`}}},
		{"device path", func(c *Config) { c.Devices = []string{"/dev/sda"} },
			[]want{{"devices[0]", `devices[0]="/dev/sda": want a device name pattern`}}},
		{"bad glob", func(c *Config) { c.Devices = []string{"sd[a"} },
			[]want{{"devices[0]", `devices[0]="sd[a": bad glob pattern`}}},
		{"listen without port", func(c *Config) { c.Listen = "127.0.0.1" },
			[]want{{"listen", `listen="127.0.0.1": want host:port`}}},
		{"listen named port", func(c *Config) { c.Listen = "localhost:http" },
			[]want{{"listen", `listen="localhost:http": port must be a number from 1 to 65535`}}},
		{"listen port too big", func(c *Config) { c.Listen = ":70000" },
			[]want{{"listen", `listen=":70000": port must be a number`}}},
		{"relative state file", func(c *Config) { c.StateFile = "state.json" },
			[]want{{"state_file", `state_file="state.json": must be an absolute path`}}},
		{"empty state file", func(c *Config) { c.StateFile = "" },
			[]want{{"state_file", `state_file="": must not be empty`}}},
		{"relative sys", func(c *Config) { c.Paths.Sys = "sys" },
			[]want{{"paths.sys", `paths.sys="sys": must be an absolute path`}}},
		{"proc with dotdot", func(c *Config) { c.Paths.Proc = "/host/../proc" },
			[]want{{"paths.proc", `paths.proc="/host/../proc": must not contain ".."`}}},
		{"bad log level", func(c *Config) { c.Log.Level = LogLevel(slog.LevelInfo + 1) },
			[]want{{"log.level", `log.level=info+1: must be debug, info, warn or error`}}},
		{"bad log format", func(c *Config) { c.Log.Format = "logfmt" },
			[]want{{"log.format", `log.format="logfmt": must be text or json`}}},
		{"several at once, in key order", func(c *Config) {
			c.Source = "x"
			c.Weights[1] = 2000
			c.Log.Format = "xml"
		}, []want{{"source", `source="x"`}, {"weights[1]", "weights[1]=2000"}, {"log.format", `log.format="xml"`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tc.change(&c)
			kes := keyErrors(t, c.Validate())
			if len(kes) != len(tc.want) {
				t.Fatalf("Validate() = %v\nwant %d errors: %v", c.Validate(), len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if kes[i].Key != w.key || !strings.Contains(kes[i].Error(), w.text) {
					t.Errorf("error %d = %q (key %q), want key %q and text %q", i, kes[i].Error(), kes[i].Key, w.key, w.text)
				}
			}
		})
	}
}

// health.* values: a bad model names its entry and says why.
func TestValidateHealth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		h    Health
		want string
	}{
		{Health{Models: mustModels(t, "sdb=aws-gp2:1GiB", "sdc=aws-gp2:2GiB", "sdb=aws-gp2:3GiB")},
			`health.models[2]="sdb=aws-gp2:3GiB": a second model of device sdb (the first is health.models[0])`},
		{Health{DStateWorkloads: -1}, "health.dstate_workloads"},
		{Health{SyncProbe: "rel/path"}, "health.sync_probe"},
		{Health{SyncProbeInterval: -time.Second}, "health.sync_probe_interval"},
	} {
		c := Default()
		c.Health = tc.h
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want one with %q", tc.h, err, tc.want)
		}
	}
	c := Default()
	c.Health.Models = mustModels(t, "nvme1n1=aws-gp2:100GiB", "sdb=iops=100/3000/5400000")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if m := c.HealthModels(); m["nvme1n1"].IOPS.Baseline != 300 || m["sdb"].IOPS.Size != 5400000 {
		t.Errorf("models %+v", m)
	}
}

// TestValidateBurstHold: the burst hold's keys are checked alone and
// together (a hold needs a model, and every level it holds must be one the
// throttle manages); each error names the key and the bad value.
func TestValidateBurstHold(t *testing.T) {
	t.Parallel()
	model := mustModels(t, "vdb=iops=20/200/6000")
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // "": valid
	}{
		{"off by default", func(*Config) {}, ""},
		{"on with a model", func(c *Config) { c.Health.Models, c.Health.BurstHoldBelow = model, 0.3 }, ""},
		{"from level 4", func(c *Config) {
			c.Health.Models, c.Health.BurstHoldBelow, c.Health.BurstHoldFromLevel = model, 0.3, 4
		}, ""},
		{"negative", func(c *Config) { c.Health.Models, c.Health.BurstHoldBelow = model, -0.1 },
			`health.burst_hold_below=-0.1: must be 0 (off) or a fraction of the burst bucket below 1`},
		{"a whole bucket", func(c *Config) { c.Health.Models, c.Health.BurstHoldBelow = model, 1 },
			`health.burst_hold_below=1: must be 0 (off) or a fraction`},
		{"NaN", func(c *Config) { c.Health.Models, c.Health.BurstHoldBelow = model, math.NaN() },
			`health.burst_hold_below=NaN: must be 0 (off)`},
		{"no model", func(c *Config) { c.Health.BurstHoldBelow = 0.3 },
			`health.burst_hold_below=0.3: needs a device's burst model (health.models)`},
		{"from level 1", func(c *Config) { c.Health.BurstHoldFromLevel = 1 },
			`health.burst_hold_from_level=1: must be 2..4`},
		{"from level 5", func(c *Config) { c.Health.BurstHoldFromLevel = 5 },
			`health.burst_hold_from_level=5: must be 2..4`},
		{"a held level the throttle leaves alone", func(c *Config) {
			c.Health.Models, c.Health.BurstHoldBelow = model, 0.3
			c.ThrottleShares = []float64{1, 1, 0.5, 0.3}
		}, `health.burst_hold_from_level=2: level 2 is held but throttle_shares[1] is 1`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := Default()
			tc.change(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one with %q", err, tc.want)
			}
		})
	}
}
