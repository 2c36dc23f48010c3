package config

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFromArgsNoFlags(t *testing.T) {
	t.Parallel()
	c, fs, err := fromArgs(nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.DockerHost = DefaultDockerHost
	if !reflect.DeepEqual(c, want) {
		t.Errorf("no flags: %+v, want defaults %+v", c, want)
	}
	if fs == nil {
		t.Error("fs = nil")
	}
}

// Every flag sets its key.
func TestFromArgsEveryFlag(t *testing.T) {
	t.Parallel()
	args := []string{
		"--source", "cgroup", "--cgroup-parent", "/system.slice", "--cgroup-layout", "kubepods",
		"--cgroup-exempt", "system-*, pod*/*", "--cgroup-levels", "db-*=1,batch-*=4", "--cgroup-exempt-guaranteed",
		"--cgroup-kubelet-logs", "/host/var/log/containers", "--cgroup-kubelet-pods", "http://127.0.0.1:10255/pods", "--docker-host", "tcp://h:2375",
		"--interval", "2s", "--thresholds", "1MiB, 2MiB,3MiB,4MiB", "--weights", "800,400,200,20",
		"--boost-after", "1m", "--policy", "paper", "--usage-window", "5s", "--actuator", "cgroup", "--dry-run",
		"--throttle-shares", "1,0.5,0.4,0.2", "--throttle-min", "1MiB", "--throttle-burst", "3ms", "--throttle-reads", "500", "--throttle-with-weights=false", "--work-conserving=false", "--level-limits", "0,0,4MiB,1MiB", "--reassert", "0s",
		"--devices", "loop*,vd*", "--latency", "off", "--listen", "", "--state-file", "/tmp/s.json",
		"--path-sys", "/host/sys", "--path-proc", "/host/proc", "--log-level", "debug", "--log-format", "json",
		"--health-models", "nvme1n1=aws-gp2:100GiB,sdb=iops=100/3000/5400000,bps=1e6/2e6/3e9", "--health-dstate-workloads", "8",
		"--health-sync-probe", "/var/tmp/probe", "--health-sync-probe-interval", "5s",
		"--health-burst-hold-below", "0.25", "--health-burst-hold-from-level", "3",
		"--latency-target", "5x",
	}
	c, _, err := fromArgs(args, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Source: SourceCgroup, CgroupParent: "/system.slice", CgroupLayout: "kubepods",
		CgroupExempt: []string{"system-*", "pod*/*"}, CgroupLevels: []CgroupPin{{"db-*", 1}, {"batch-*", 4}},
		CgroupExemptGuaranteed: true, CgroupKubeletLogs: "/host/var/log/containers", CgroupKubeletPods: "http://127.0.0.1:10255/pods", DockerHost: "tcp://h:2375",
		Interval: 2 * time.Second, Thresholds: []Size{MiB, 2 * MiB, 3 * MiB, 4 * MiB},
		Weights: []uint16{800, 400, 200, 20}, BoostAfter: time.Minute, Actuator: ActuatorCgroup,
		PolicyMode: modePaper, UsageWindow: 5 * time.Second,
		DryRun: true, ThrottleShares: []float64{1, 0.5, 0.4, 0.2}, ThrottleMin: MiB, ThrottleBurst: 3 * time.Millisecond, ThrottleReads: 500,
		LatencyTarget: "5x", LevelLimits: []Size{0, 0, 4 * MiB, MiB}, Devices: []string{"loop*", "vd*"}, Latency: LatencyModeOff, Listen: "", StateFile: "/tmp/s.json",
		Paths: Paths{Sys: "/host/sys", Proc: "/host/proc"}, Log: Log{Level: logDebug, Format: "json"},
		Health: Health{Models: mustModels(t, "nvme1n1=aws-gp2:100GiB", "sdb=iops=100/3000/5400000,bps=1e6/2e6/3e9"),
			DStateWorkloads: 8, SyncProbe: "/var/tmp/probe", SyncProbeInterval: 5 * time.Second,
			BurstHoldBelow: 0.25, BurstHoldFromLevel: 3},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%+v\nwant\n%+v", c, want)
	}
	if len(args) != 2*len(flagDefs)-4 { // --dry-run, --cgroup-exempt-guaranteed, --throttle-with-weights=false and --work-conserving=false are one word
		t.Errorf("the test covers %d flags of %d", (len(args)-3)/2+3, len(flagDefs))
	}
}

// The file is read first; a flag overrides its key; a flag left out does
// not reset the file's value to the default.
func TestFromArgsFlagsOverrideFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "interval: 2s\nweights: [900, 400, 200, 50]\nlog: {level: debug}\ndry_run: true\n")
	c, _, err := fromArgs([]string{"--config", path, "--interval", "3s", "--log-format", "json", "--dry-run=false"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key       string
		got, want any
	}{
		{"interval (flag over file)", c.Interval, 3 * time.Second},
		{"weights (file)", c.Weights, []uint16{900, 400, 200, 50}},
		{"log.level (file)", c.Log.Level, logDebug},
		{"log.format (flag)", c.Log.Format, "json"},
		{"dry_run (flag false over file true)", c.DryRun, false},
		{"boost_after (default)", c.BoostAfter, 30 * time.Second},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %v, want %v", tc.key, tc.got, tc.want)
		}
	}
}

// A flag can repair a file: validation runs on the stacked result.
func TestFromArgsFlagRepairsFile(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "source: cgroup\n")
	if _, _, err := fromArgs([]string{"--config", path}, noEnv); err == nil {
		t.Fatal("source cgroup without cgroup_parent accepted")
	}
	c, _, err := fromArgs([]string{"--config", path, "--cgroup-parent", "/lxc.payload"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Source != SourceCgroup || c.CgroupParent != "/lxc.payload" {
		t.Errorf("got source %q parent %q", c.Source, c.CgroupParent)
	}
}

func TestFromArgsErrors(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "weights: [1000, 500, 250, 100]\ninterval: 1s\n")
	bad := writeFile(t, "interval: 1s\nweights:\n  [1000, 500, 600, 100]\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad duration", []string{"--interval", "1"}, `invalid value "1" for flag -interval: want a duration with a unit`},
		{"bad size", []string{"--throttle-min", "lots"}, `invalid value "lots" for flag -throttle-min: size "lots": no number`},
		{"bad weight", []string{"--weights", "1000,x,250,100"}, `weight "x": want a whole number`},
		{"empty list entry", []string{"--thresholds", "1MiB,,2MiB,3MiB"}, "empty entry"},
		{"unknown flag", []string{"--intervall", "1s"}, "flag provided but not defined: -intervall (ddiskqos run -h lists the flags)"},
		{"positional", []string{"now"}, `unexpected argument "now"`},
		{"range error names the flag", []string{"--config", path, "--weights", "1000,500,600,100"},
			"--weights: weights[2]=600: level 3 weight is greater than level 2 weight 500"},
		{"cross-key error names the flag", []string{"--config", path, "--boost-after", "5s", "--interval", "10s"},
			"--boost-after: boost_after=5s: must be longer than interval (10s)"},
		{"range error names the file line", []string{"--config", bad},
			bad + ":3: weights[2]=600: level 3 weight is greater"},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "nope.yaml")}, "no such file"},
		{"bad hold threshold", []string{"--health-burst-hold-below", "half"}, `invalid value "half" for flag -health-burst-hold-below: want a number`},
		{"hold without a model names the flag", []string{"--health-burst-hold-below", "0.2"},
			"--health-burst-hold-below: health.burst_hold_below=0.2: needs a device's burst model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := fromArgs(tc.args, noEnv)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestFromArgsHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-h", "--help"} {
		if _, _, err := fromArgs([]string{arg}, noEnv); !errors.Is(err, flag.ErrHelp) {
			t.Errorf("%s: err = %v, want flag.ErrHelp", arg, err)
		}
	}
}

// Reload re-reads the file and applies the command line over it again.
func TestReloadKeepsFlags(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "interval: 2s\nweights: [900, 400, 200, 50]\n")
	old, fs, err := fromArgs([]string{"--config", path, "--interval", "3s"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("interval: 5s\nweights: [1000, 300, 200, 10]\nlisten: ':9292'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := load(ConfigPath(fs), fs, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval != 3*time.Second {
		t.Errorf("interval = %v, want the flag's 3s", c.Interval)
	}
	if want := []uint16{1000, 300, 200, 10}; !reflect.DeepEqual(c.Weights, want) {
		t.Errorf("weights = %v, want the new file's %v", c.Weights, want)
	}
	live, restart := Diff(old, c)
	if !reflect.DeepEqual(live, []string{"weights"}) || !reflect.DeepEqual(restart, []string{"listen"}) {
		t.Errorf("Diff = %v, %v; want [weights], [listen]", live, restart)
	}

	// A bad file is an error; the caller keeps old.
	if err := os.WriteFile(path, []byte("interval: 5s\nweights: [1000, 300, 200]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Reload(path, fs); err == nil || !strings.Contains(err.Error(), "weights=[1000 300 200]: want 4 weights") {
		t.Errorf("Reload of a bad file: err = %v", err)
	}
}

// RegisterFlags and ApplyFlags work on a caller's own FlagSet.
func TestApplyFlagsOnlySet(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	def := Default()
	def.RegisterFlags(fs)
	if err := fs.Parse([]string{"--weights", "900,400,200,50"}); err != nil {
		t.Fatal(err)
	}
	c := Default()
	c.Interval = 7 * time.Second // as if from a file
	if err := c.ApplyFlags(fs); err != nil {
		t.Fatal(err)
	}
	if c.Interval != 7*time.Second || !reflect.DeepEqual(c.Weights, []uint16{900, 400, 200, 50}) {
		t.Errorf("interval %v weights %v", c.Interval, c.Weights)
	}
	if f := fs.Lookup("interval"); f.DefValue != "1s" {
		t.Errorf("--interval DefValue = %q, want 1s", f.DefValue)
	}
	if !reflect.DeepEqual(def, Default()) {
		t.Error("parsing flags changed the Config they were registered from")
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		change        func(*Config)
		live, restart []string
	}{
		{"same", func(*Config) {}, nil, nil},
		{"nil and empty devices are equal", func(c *Config) { c.Devices = []string{} }, nil, nil},
		{"live keys", func(c *Config) {
			c.Interval = 2 * time.Second
			c.Thresholds[0] = MiB
			c.Weights[3] = 50
			c.BoostAfter = time.Minute
			c.Log.Level = logDebug
		}, []string{"interval", "thresholds", "weights", "boost_after", "log.level"}, nil},
		{"restart keys", func(c *Config) {
			c.Source = SourceCgroup
			c.CgroupParent = "/lxc.payload"
			c.DockerHost = "tcp://x:1"
			c.Actuator = ActuatorDocker
			c.DryRun = true
			c.ThrottleShares[3] = 0.2
			c.ThrottleMin = MiB
			c.ThrottleBurst = time.Millisecond
			c.ThrottleReads = 2000
			c.ThrottleWithWeights = false
			c.LevelLimits = []Size{0, 0, 0, MiB}
			c.Reassert = 0
			c.Devices = []string{"sd*"}
			c.Listen = ""
			c.StateFile = "/x"
			c.Paths.Sys = "/host/sys"
			c.Paths.Proc = "/host/proc"
			c.Log.Format = "json"
		}, nil, []string{"source", "cgroup_parent", "docker_host", "actuator", "dry_run", "throttle_shares",
			"throttle_min", "throttle_burst", "throttle_reads", "throttle_with_weights", "level_limits", "reassert", "devices", "listen", "state_file",
			"paths.sys", "paths.proc", "log.format"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old, c := Default(), Default()
			tc.change(&c)
			live, restart := Diff(old, c)
			if !reflect.DeepEqual(live, tc.live) || !reflect.DeepEqual(restart, tc.restart) {
				t.Errorf("Diff = %q, %q\nwant %q, %q", live, restart, tc.live, tc.restart)
			}
		})
	}
	// Every live key is a real key.
	keys := map[string]bool{}
	for _, k := range leafKeys(reflect.TypeOf(Config{}), "") {
		keys[k] = true
	}
	for k := range liveKeys {
		if !keys[k] {
			t.Errorf("liveKeys has %q, which is not a config key", k)
		}
	}
}

// ApplyLive takes over exactly the live keys: afterwards Diff finds no
// live key, and every restart key still differs.
func TestApplyLive(t *testing.T) {
	t.Parallel()
	old, next := Default(), Default()
	next.Interval = 3 * time.Second
	next.Thresholds[1] = 3 * MiB
	next.Weights[0] = 900
	next.BoostAfter = time.Hour
	next.PolicyMode, next.UsageWindow = modePaper, time.Minute
	next.Log.Level = logDebug
	next.DryRun = true
	next.Listen = ":1"
	next.Devices = []string{"vd*"}
	got := ApplyLive(old, next)
	live, restart := Diff(got, next)
	if len(live) != 0 || !reflect.DeepEqual(restart, []string{"dry_run", "devices", "listen"}) {
		t.Errorf("after ApplyLive, Diff = %q, %q; want none, [dry_run devices listen]", live, restart)
	}
	if l, _ := Diff(old, got); len(l) != len(liveKeys) {
		t.Errorf("ApplyLive changed %q, want all %d live keys", l, len(liveKeys))
	}
	got.Weights[0] = 1
	if next.Weights[0] != 900 {
		t.Error("ApplyLive shares the weights slice with next")
	}
}

// Every key has a flag, and every flag sets a key.
func TestFlagsCoverKeys(t *testing.T) {
	t.Parallel()
	byKey := map[string]bool{}
	for _, d := range flagDefs {
		byKey[d.key] = true
		if !strings.Contains(string(defaultYAML), "--"+d.name) && !flagNamedLikeKey(d) {
			t.Errorf("flag --%s is not named after its key %s", d.name, d.key)
		}
	}
	for _, k := range leafKeys(reflect.TypeOf(Config{}), "") {
		if !byKey[k] {
			t.Errorf("key %s has no flag", k)
		}
	}
}

func flagNamedLikeKey(d flagDef) bool {
	k := strings.NewReplacer("_", "-", "paths.", "path-", "log.", "log-", "health.", "health-").Replace(d.key)
	return k == d.name
}
