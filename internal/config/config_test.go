package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/policy"
)

func noEnv(string) string { return "" }

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ddiskqos.yaml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// keyErrors returns the *KeyError of a joined error, failing on any other.
func keyErrors(t *testing.T, err error) []*KeyError {
	t.Helper()
	if err == nil {
		return nil
	}
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []*KeyError
	for _, e := range errs {
		var ke *KeyError
		if !errors.As(e, &ke) {
			t.Fatalf("error %v (%T) is not a *KeyError", e, e)
		}
		out = append(out, ke)
	}
	return out
}

func TestDefaultValid(t *testing.T) {
	t.Parallel()
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
	want := policy.DefaultConfig()
	want.Mode = policy.ModeRecent // the daemon's default; bench paper keeps the paper's
	if got := Default().Policy(); got != want {
		t.Errorf("Default().Policy() = %+v, want policy.DefaultConfig() %+v", got, want)
	}
	// Default() hands out fresh slices.
	a := Default()
	a.Weights[0] = 1
	if Default().Weights[0] != 1000 {
		t.Error("Default() shares its slices between calls")
	}
}

// The documented file and the code must never drift: default.yaml decoded
// onto a zero Config is exactly Default(), and it sets every key.
func TestDefaultYAMLIsDefault(t *testing.T) {
	t.Parallel()
	var c Config
	lines, err := decode(DefaultYAML(), "default.yaml", &c)
	if err != nil {
		t.Fatalf("decode default.yaml: %v", err)
	}
	if want := Default(); !reflect.DeepEqual(c, want) {
		t.Errorf("default.yaml decodes to\n%+v\nDefault() is\n%+v", c, want)
	}
	for _, key := range leafKeys(reflect.TypeOf(Config{}), "") {
		if _, ok := lines[key]; !ok {
			t.Errorf("default.yaml does not set (and document) key %s", key)
		}
	}
}

func leafKeys(t reflect.Type, prefix string) []string {
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		k := yamlKey(f)
		if k == "" {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			keys = append(keys, leafKeys(f.Type, join(prefix, k))...)
			continue
		}
		keys = append(keys, join(prefix, k))
	}
	return keys
}

func TestLoadNoFile(t *testing.T) {
	t.Parallel()
	want := Default()
	want.DockerHost = DefaultDockerHost
	for _, tc := range []struct {
		name, file string
	}{
		{"no file", ""},
		{"empty file", "\n"},
		{"only comments", "# nothing here\n"},
		{"empty document", "---\n"},
		{"the default file", string(defaultYAML)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := ""
			if tc.file != "" {
				path = writeFile(t, tc.file)
			}
			c, err := load(path, nil, noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c, want) {
				t.Errorf("load = %+v, want %+v", c, want)
			}
		})
	}
}

func TestLoadDockerHostEnv(t *testing.T) {
	t.Parallel()
	env := func(k string) string {
		if k == "DOCKER_HOST" {
			return "tcp://10.0.0.1:2375"
		}
		return ""
	}
	c, err := load("", nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.DockerHost != "tcp://10.0.0.1:2375" {
		t.Errorf("DockerHost = %q, want $DOCKER_HOST", c.DockerHost)
	}
	// The file wins over the environment.
	c, err = load(writeFile(t, "docker_host: unix:///run/docker.sock\n"), nil, env)
	if err != nil {
		t.Fatal(err)
	}
	if c.DockerHost != "unix:///run/docker.sock" {
		t.Errorf("DockerHost = %q, want the file's", c.DockerHost)
	}
	// A bad $DOCKER_HOST is named as such.
	_, err = load("", nil, func(string) string { return "ftp://x" })
	if err == nil || !strings.Contains(err.Error(), `$DOCKER_HOST: docker_host="ftp://x": scheme`) {
		t.Errorf("bad $DOCKER_HOST: err = %v", err)
	}
}

func TestLoadFile(t *testing.T) {
	t.Parallel()
	file := `# a host with LXC containers
source: cgroup
cgroup_parent: /lxc.payload
cgroup_layout: children
cgroup_exempt: ["system-*", "pod*/*"]
cgroup_levels: ["db-*=1", "a=b=4"]
cgroup_exempt_guaranteed: true
cgroup_kubelet_logs: ""
interval: 500ms
thresholds: [4MiB, 16777216, 64M, 0.25GiB]
weights:
  - 900
  - 400
  - 200
  - 50
policy: paper
usage_window: 20s
boost_after: 1m
actuator: cgroup
dry_run: true
throttle_shares: [1, 0.5, 0.5, 0.25]
throttle_min: 4MiB
throttle_burst: 0s
throttle_reads: 2000
throttle_with_weights: false
reassert: 0s
devices: ["sd*", "vd?"]
latency: off   # YAML 1.1's boolean off: a word here
listen: ":9000"
state_file: /var/lib/ddiskqos/state.json
paths: {sys: /host/sys, proc: /host/proc}
log:
  level: debug
  format:   # no value: keeps the default
anchored: &a 1s
`
	// anchored is unknown; drop it for the success case.
	file = strings.Replace(file, "anchored: &a 1s\n", "", 1)
	c, err := load(writeFile(t, file), nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Source: SourceCgroup, CgroupParent: "/lxc.payload", DockerHost: DefaultDockerHost,
		CgroupLayout: "children", CgroupExempt: []string{"system-*", "pod*/*"},
		// The last "=" splits: a glob may hold one.
		CgroupLevels: []CgroupPin{{"db-*", 1}, {"a=b", 4}}, CgroupExemptGuaranteed: true,
		Interval:   500 * time.Millisecond,
		PolicyMode: modePaper, UsageWindow: 20 * time.Second,
		Thresholds:     []Size{4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB},
		Weights:        []uint16{900, 400, 200, 50},
		BoostAfter:     time.Minute,
		Actuator:       ActuatorCgroup,
		DryRun:         true,
		ThrottleShares: []float64{1, 0.5, 0.5, 0.25},
		ThrottleMin:    4 * MiB,
		ThrottleReads:  2000,
		LatencyTarget:  LatencyAuto,
		WorkConserving: true,
		Reassert:       0,
		Devices:        []string{"sd*", "vd?"},
		Latency:        LatencyModeOff,
		Listen:         ":9000",
		StateFile:      "/var/lib/ddiskqos/state.json",
		Paths:          Paths{Sys: "/host/sys", Proc: "/host/proc"},
		Log:            Log{Level: logDebug, Format: "text"},
		Health:         Health{DStateWorkloads: 32, BurstHoldFromLevel: 2},
	}
	if !reflect.DeepEqual(c, want) {
		t.Errorf("load =\n%+v\nwant\n%+v", c, want)
	}
}

func TestLoadAliases(t *testing.T) {
	t.Parallel()
	c, err := load(writeFile(t, "interval: &i 2s\nboost_after: 1m\nreassert: *i\n"), nil, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Reassert != 2*time.Second {
		t.Errorf("reassert via alias = %v, want 2s", c.Reassert)
	}
}

// Every decoding error names the file and line, the key and the value as
// written, and says what was wanted.
func TestLoadStrict(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file string
		want []string // one substring per error, in order
	}{
		{"unknown key", "interval: 1s\nspeed: 2s\n",
			[]string{":2: speed: unknown key (the keys at the top level are source, cgroup_parent"}},
		{"misspelt key", "interval: 1s\nthreshold: [1, 2, 3, 4]\n",
			[]string{":2: threshold: unknown key; did you mean thresholds?"}},
		{"unknown nested key", "paths:\n  sys: /sys\n  sysroot: /sys\n",
			[]string{":3: paths.sysroot: unknown key (the keys under paths are sys, proc)"}},
		{"flag spelling of a key", "cgroup-parent: /lxc.payload\n",
			[]string{":1: cgroup-parent: unknown key; did you mean cgroup_parent?"}},
		{"duplicate key", "interval: 1s\nweights: [1000, 500, 250, 100]\ninterval: 2s\n",
			[]string{":3: interval: duplicate key (first at line 1)"}},
		{"duration without unit", "interval: 1\n",
			[]string{`:1: interval="1": want a duration with a unit, such as 500ms, 1s or 2m`}},
		{"bad duration", "boost_after: soon\n",
			[]string{`:1: boost_after="soon": want a duration`}},
		{"bad size", "thresholds: [2MiB, 8XB, 32MiB, 128MiB]\n",
			[]string{`:1: thresholds[1]="8XB": want a size such as 8MiB or 8388608: unknown unit "XB"`}},
		{"negative size", "throttle_min: -1\n",
			[]string{`:1: throttle_min="-1": want a size such as 8MiB or 8388608: negative`}},
		{"fractional weight", "weights: [1000, 500.5, 250, 100]\n",
			[]string{`:1: weights[1]="500.5": want a whole number`}},
		{"weight out of range", "weights: [1000, 500, 250, 70000]\n",
			[]string{`:1: weights[3]="70000": want a whole number from 0 to 65535`}},
		{"string weight", "weights: [1000, high, 250, 100]\n",
			[]string{`:1: weights[1]="high": want a whole number`}},
		{"scalar for a list", "weights: 1000,500,250,100\n",
			[]string{`:1: weights: want a list such as [1000, 500, 250, 100], got "1000,500,250,100"`}},
		{"list for a scalar", "interval: [1s]\n",
			[]string{":1: interval: want a duration with a unit, such as 500ms, 1s or 2m, got a list"}},
		{"scalar for a mapping", "log: debug\n",
			[]string{`:1: log: want a mapping of the keys level, format, got "debug"`}},
		{"bad bool", "dry_run: maybe\n",
			[]string{`:1: dry_run="maybe": want true or false`}},
		{"bad float", "throttle_shares: [1, half, 0.4, 0.3]\n",
			[]string{`:1: throttle_shares[1]="half": want a number`}},
		{"empty list entry", "devices: [sd*, ~]\n",
			[]string{":1: devices[1]: empty list entry"}},
		{"mapping for a string", "listen: {host: x}\n",
			[]string{":1: listen: want a string, got a mapping"}},
		{"not a mapping", "- interval\n",
			[]string{":1: the config file must be a mapping of keys"}},
		{"two documents", "interval: 1s\n---\ninterval: 2s\n",
			[]string{":2: a second YAML document"}},
		{"syntax error", "interval: 1s\n  weights: [\n",
			[]string{"yaml: line"}},
		{"all problems at once", "intervall: 1s\nweights: [1000, x, 250, 100]\nlog: {level: loud, colour: red}\n",
			[]string{":1: intervall: unknown key", `:2: weights[1]="x"`, `:3: log.level="loud": must be debug, info, warn or error`, ":3: log.colour: unknown key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeFile(t, tc.file)
			_, err := load(path, nil, noEnv)
			if err == nil {
				t.Fatalf("load succeeded, want errors %q", tc.want)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(lines), len(tc.want), err)
			}
			for i, w := range tc.want {
				if !strings.Contains(lines[i], w) || !strings.HasPrefix(lines[i], path) {
					t.Errorf("error %d = %q, want it to start with the file and contain %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
	big := writeFile(t, "# "+strings.Repeat("x", maxFileSize)+"\n")
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge file: err = %v", err)
	}
	// A FIFO with no writer blocked the start for ever (issue 18); a
	// directory is no config either. Each is refused at once, by name.
	fifo := filepath.Join(t.TempDir(), "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{fifo: "named pipe (FIFO)", t.TempDir(): "directory"} {
		done := make(chan error, 1)
		go func() { _, err := Load(path); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "is a "+kind+", not a regular file") {
				t.Errorf("config file that is a %s: err = %v", kind, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Load of a %s did not return in 10 s", kind)
		}
	}
}

// A value the file decodes fine but Validate rejects names the file's line.
func TestLoadValidationOrigin(t *testing.T) {
	t.Parallel()
	path := writeFile(t, "interval: 1s\nweights:\n  - 1000\n  - 500\n  - 600\n  - 100\nsource: cgroup\n")
	_, err := load(path, nil, noEnv)
	kes := keyErrors(t, err)
	if len(kes) != 2 {
		t.Fatalf("want 2 errors, got %v", err)
	}
	if kes[0].Key != "cgroup_parent" || kes[0].Origin != "" {
		t.Errorf("error 0 = %+v, want cgroup_parent with no origin (it is the default)", kes[0])
	}
	if kes[1].Key != "weights[2]" || kes[1].Origin != path+":5" {
		t.Errorf("error 1 = %+v, want weights[2] from %s:5", kes[1], path)
	}
}

func TestSize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Size
		str  string
	}{
		{"0", 0, "0"},
		{"1000", 1000, "1000"},
		{"4k", 4 * KiB, "4KiB"},
		{"1536k", 1536 * KiB, "1536KiB"},
		{"2MiB", 2 * MiB, "2MiB"},
		{"100MB", 100_000_000, "100000000"},
		{"0.25GiB", 256 * MiB, "256MiB"},
		{"3TiB", 3 * TiB, "3TiB"},
	} {
		got, err := ParseSize(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			continue
		}
		if s := got.String(); s != tc.str {
			t.Errorf("Size(%d).String() = %q, want %q", got, s, tc.str)
		}
		if back, err := ParseSize(got.String()); err != nil || back != got {
			t.Errorf("ParseSize(%q) = %d, %v; String does not parse back", got.String(), back, err)
		}
	}
}

func TestSlogLevel(t *testing.T) {
	t.Parallel()
	for lvl, want := range map[string]string{"debug": "DEBUG", "info": "INFO", "warn": "WARN", "error": "ERROR"} {
		l, err := ParseLogLevel(lvl)
		if err != nil {
			t.Fatal(err)
		}
		if got := (Log{Level: l}).SlogLevel().String(); got != want {
			t.Errorf("SlogLevel(%q) = %s, want %s", lvl, got, want)
		}
		if l.String() != lvl {
			t.Errorf("ParseLogLevel(%q).String() = %q", lvl, l.String())
		}
	}
}

func TestPolicy(t *testing.T) {
	t.Parallel()
	c := Default()
	c.Thresholds = []Size{1, 2, 3, 4}
	c.Weights = []uint16{800, 400, 200, 10}
	c.BoostAfter = time.Minute
	want := policy.Config{
		Mode: policy.ModeRecent, Window: policy.DefaultWindow,
		Allowances: [4]uint64{1, 2, 3, 4},
		Weights:    [4]uint16{800, 400, 200, 10},
		BoostAfter: time.Minute,
	}
	if got := c.Policy(); got != want {
		t.Errorf("Policy() = %+v, want %+v", got, want)
	}
	c.Weights = c.Weights[:2] // must not panic
	_ = c.Policy()
}
