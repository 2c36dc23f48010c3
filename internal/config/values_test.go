package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/policy"
)

var (
	logDebug  = LogLevel(slog.LevelDebug)
	modePaper = PolicyMode(policy.ModePaper)
)

// mustModels decodes health.models entries.
func mustModels(t testing.TB, entries ...string) []HealthModel {
	t.Helper()
	var out []HealthModel
	for _, e := range entries {
		m, err := ParseHealthModel(e)
		if err != nil {
			t.Fatalf("%q: %v", e, err)
		}
		out = append(out, m)
	}
	return out
}

// Each typed value decodes its text once; a good one writes back as it
// reads, a bad one says what is wrong.
func TestParseValues(t *testing.T) {
	t.Parallel()
	type parser func(string) (fmt.Stringer, error)
	pin := func(s string) (fmt.Stringer, error) { return ParseCgroupPin(s) }
	model := func(s string) (fmt.Stringer, error) { return ParseHealthModel(s) }
	mode := func(s string) (fmt.Stringer, error) { return ParsePolicyMode(s) }
	level := func(s string) (fmt.Stringer, error) { return ParseLogLevel(s) }
	lat := func(s string) (fmt.Stringer, error) { return ParseLatencyMode(s) }
	for _, tc := range []struct {
		parse parser
		in    string
		want  any    // the value, when good
		err   string // a substring of the error, when bad
	}{
		{pin, "db-*=1", CgroupPin{"db-*", 1}, ""},
		{pin, "a=b=4", CgroupPin{"a=b", 4}, ""},
		{pin, "web-*", nil, "want GLOB=LEVEL, such as db-*=1"},
		{pin, "=1", nil, "empty pattern"},
		{pin, "[=2", nil, `bad glob pattern "["`},
		{pin, "batch-*=5", nil, `level "5" of pattern "batch-*" must be 1 to 4`},
		{pin, "x=one", nil, `level "one" of pattern "x" must be 1 to 4`},

		{model, "sdb=iops=100/3000/5400000", nil, ""},
		{model, "nvme1n1=aws-gp2:100GiB", nil, ""},
		{model, "sdb", nil, "want DEVICE=MODEL"},
		{model, "a/b=aws-gp2:1GiB", nil, "want DEVICE=MODEL"},
		{model, "sdb=aws-gp3:1GiB", nil, "unknown preset"},
		{model, "sdb=iops=300/100/5", nil, "burst"},

		{mode, "recent", PolicyMode(policy.ModeRecent), ""},
		{mode, "paper", modePaper, ""},
		{mode, "fifo", nil, "want recent (usage decays"},
		{mode, "Paper", nil, "want recent"},

		{lat, "auto", LatencyModeAuto, ""},
		{lat, "off", LatencyModeOff, ""},
		{lat, "on", nil, "want auto (the eBPF latency sensor"},
		{lat, "false", nil, "or off (never load BPF)"},
		{lat, "", nil, "want auto"},

		{level, "debug", logDebug, ""},
		{level, "error", LogLevel(slog.LevelError), ""},
		{level, "trace", nil, "must be debug, info, warn or error"},
		{level, "INFO", nil, "must be debug, info, warn or error"},
		{level, "info+1", nil, "must be debug, info, warn or error"},
	} {
		got, err := tc.parse(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.in, err)
			continue
		}
		if tc.want != nil && !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q = %#v, want %#v", tc.in, got, tc.want)
		}
		if got.String() != tc.in {
			t.Errorf("%q writes back as %q", tc.in, got.String())
		}
		back, err := tc.parse(got.String())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("%q: read back %#v, %v; want %#v", tc.in, back, err, got)
		}
	}
	m := mustModels(t, "sdb=iops=100/3000/5400000")[0]
	if m.Device != "sdb" || m.Model.IOPS.Baseline != 100 || m.Model.IOPS.Burst != 3000 || m.Model.IOPS.Size != 5400000 {
		t.Errorf("sdb=iops=100/3000/5400000 decoded as %+v", m)
	}
}

// A bad typed value in the file is one error naming the file, the line,
// the key (with its list index) and the value as written; the file is not
// applied, and a reload of it (SIGHUP) is refused, so the daemon keeps
// the configuration it runs.
func TestLoadBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file, want string
	}{
		{"source: cgroup\ncgroup_parent: /lxc\ncgroup_levels: [db-*=1, web-*]\n",
			`:3: cgroup_levels[1]="web-*": want GLOB=LEVEL, such as db-*=1`},
		{"source: cgroup\ncgroup_parent: /lxc\ncgroup_levels:\n  - db-*=9\n",
			`:4: cgroup_levels[0]="db-*=9": level "9" of pattern "db-*" must be 1 to 4`},
		{"health:\n  models: [sdb=aws-gp3:1GiB]\n", `:2: health.models[0]="sdb=aws-gp3:1GiB": `},
		{"health:\n  models: [sdb]\n", `:2: health.models[0]="sdb": want DEVICE=MODEL`},
		{"policy: fifo\n", `:1: policy="fifo": want recent`},
		{"policy: 1\n", `:1: policy="1": want recent`},
		{"latency: no\n", `:1: latency="no": want auto (the eBPF latency sensor where the kernel and privileges allow) or off`},
		{"latency: [off]\n", `:1: latency: want auto or off, got a list`},
		{"log:\n  level: trace\n", `:2: log.level="trace": must be debug, info, warn or error`},
		{"log:\n  level: [debug]\n", `:2: log.level: want debug, info, warn or error, got a list`},
	} {
		path := writeFile(t, tc.file)
		c, err := load(path, nil, noEnv)
		if err == nil || !strings.Contains(err.Error(), path+tc.want) {
			t.Errorf("%q: err %v, want %q", tc.file, err, path+tc.want)
		}
		if ke := (*KeyError)(nil); !errors.As(err, &ke) {
			t.Errorf("%q: %T is no KeyError", tc.file, err)
		}
		if !reflect.DeepEqual(c, Config{}) {
			t.Errorf("%q: a configuration came back with the error: %+v", tc.file, c)
		}

		// SIGHUP: a good file, then the bad one.
		if err := os.WriteFile(path, []byte("interval: 2s\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, fs, err := fromArgs([]string{"--config", path}, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(tc.file), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Reload(path, fs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reload of %q: err %v, want %q", tc.file, err, tc.want)
		}
	}
}

// On the command line the same values are decoded by the same functions,
// and an error names the flag.
func TestFlagBadValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--source", "cgroup", "--cgroup-parent", "/lxc", "--cgroup-levels", "db-*=1,web-*"}, `"web-*": want GLOB=LEVEL`},
		{[]string{"--health-models", "sdb=aws-gp2:1GiB,sdc"}, `"sdc": want DEVICE=MODEL`},
		{[]string{"--policy", "fifo"}, "want recent"},
		{[]string{"--log-level", "trace"}, "must be debug, info, warn or error"},
		{[]string{"--latency", "on"}, "want auto"},
	} {
		_, _, err := fromArgs(tc.args, noEnv)
		flag := strings.TrimPrefix(tc.args[len(tc.args)-2], "--")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), flag) {
			t.Errorf("%q: err %v, want one naming %s and saying %q", tc.args, err, flag, tc.want)
		}
	}
	c, _, err := fromArgs([]string{"--source", "cgroup", "--cgroup-parent", "/lxc", "--cgroup-levels", "db-*=1, x=4",
		"--health-models", "sdb=aws-gp2:1GiB", "--policy", "paper", "--log-level", "warn"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if want := []CgroupPin{{"db-*", 1}, {"x", 4}}; !reflect.DeepEqual(c.CgroupLevels, want) {
		t.Errorf("cgroup_levels %v, want %v", c.CgroupLevels, want)
	}
	if c.HealthModels()["sdb"].IOPS.Baseline == 0 || c.PolicyMode != modePaper || c.Log.SlogLevel() != slog.LevelWarn {
		t.Errorf("health.models %v, policy %v, log.level %v", c.Health.Models, c.PolicyMode, c.Log.Level)
	}
}

func TestParseLatencyTarget(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in, want  string
		off       bool
		fixed     time.Duration
		multiple  float64
		wantError bool
	}{
		{in: "", want: "auto"},
		{in: "auto", want: "auto"},
		{in: "off", want: "off", off: true},
		{in: "5x", want: "5x", multiple: 5},
		{in: "2.50x", want: "2.5x", multiple: 2.5},
		{in: "2ms", want: "2ms", fixed: 2 * time.Millisecond},
		{in: "1500us", want: "1.5ms", fixed: 1500 * time.Microsecond},
		{in: "0.5x", wantError: true},
		{in: "x", wantError: true},
		{in: "0s", wantError: true},
		{in: "-1ms", wantError: true},
		{in: "fast", wantError: true},
	} {
		v, err := ParseLatencyTarget(c.in)
		if c.wantError {
			if err == nil {
				t.Errorf("ParseLatencyTarget(%q) = %q, want an error", c.in, v)
			}
			continue
		}
		if err != nil || string(v) != c.want {
			t.Errorf("ParseLatencyTarget(%q) = %q, %v; want %q", c.in, v, err, c.want)
			continue
		}
		off, fixed, m := v.Spec()
		if off != c.off || fixed != c.fixed || m != c.multiple {
			t.Errorf("%q.Spec() = %v, %s, %g; want %v, %s, %g", v, off, fixed, m, c.off, c.fixed, c.multiple)
		}
	}
}
