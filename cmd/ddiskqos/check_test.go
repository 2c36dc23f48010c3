package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/view"
)

func runCheckT(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var o, e bytes.Buffer
	code = runCheck(args, &o, &e)
	return o.String(), e.String(), code
}

// go test ./cmd/ddiskqos/ -run Check -update rewrites testdata/check/sample.json.
func checkGolden(t *testing.T, name, got string) {
	t.Helper()
	testkit.Golden(t, filepath.Join("testdata", "check", name), got)
}

// checkTextAnon is the text report of `check args... --json`'s report with
// the test tree's root written $ROOT before the text is laid out: the
// root's length varies from run to run, and the text wraps long lines.
func checkTextAnon(t *testing.T, root string, args ...string) (string, int) {
	t.Helper()
	out, errOut, code := runCheckT(t, append(args, "--json")...)
	var r host.Report
	if err := json.Unmarshal([]byte(strings.ReplaceAll(out, root, "$ROOT")), &r); err != nil {
		t.Fatalf("check --json: %v (stderr %q)", err, errOut)
	}
	var b bytes.Buffer
	view.Check(&b, r)
	return b.String(), code
}

func TestCheckGolden(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	dh := hosttest.FakeEngine(t, tr.Root, hosttest.Engine{Version: "20.10.24+dfsg1", APIVersion: "1.41", CgroupDriver: "cgroupfs", CgroupVersion: "1",
		StorageDriver: "overlay2", RootDir: "/var/lib/docker"})
	args := []string{"--path-sys", tr.Sys, "--path-proc", tr.Proc, "--docker-host", dh}
	anon := func(s string) string { return strings.ReplaceAll(s, tr.Root, "$ROOT") }

	out, errOut, code := runCheckT(t, args...)
	if code != 0 || errOut != "" {
		t.Errorf("text: exit %d, stderr %q", code, errOut)
	}
	// The text mode prints the report of --json (laid out for its own
	// root); internal/view's golden test holds the text itself.
	text, _ := checkTextAnon(t, tr.Root, args...)
	if !slices.Equal(strings.Fields(anon(out)), strings.Fields(text)) {
		t.Errorf("check's text output is not the report of check --json:\n%s", out)
	}

	out, errOut, code = runCheckT(t, append(args, "--json")...)
	if code != 0 || errOut != "" {
		t.Errorf("json: exit %d, stderr %q", code, errOut)
	}
	checkGolden(t, "sample.json", anon(out))

	// The JSON contract: the fields documented in the brief are there.
	var doc struct {
		Cgroup struct {
			Mode        string `json:"mode"`
			IOHierarchy struct {
				Version int    `json:"version"`
				Mount   string `json:"mount"`
			} `json:"io_hierarchy"`
		} `json:"cgroup"`
		Devices []struct {
			Name, Dev, Scheduler, Mechanism string
			WeightsEffective                *bool `json:"weights_effective"`
		} `json:"devices"`
		Checks []struct{ ID, Status, Value, Why, Fix *string } `json:"checks"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Cgroup.Mode != "hybrid" || doc.Cgroup.IOHierarchy.Version != 1 || !strings.HasSuffix(doc.Cgroup.IOHierarchy.Mount, "/sys/fs/cgroup/blkio") {
		t.Errorf("cgroup: %+v", doc.Cgroup)
	}
	if len(doc.Devices) != 6 || doc.Devices[0].Name != "dm-0" || doc.Devices[0].Dev != "252:0" || doc.Devices[0].WeightsEffective == nil {
		t.Errorf("devices: %+v", doc.Devices)
	}
	for _, c := range doc.Checks {
		if c.ID == nil || c.Status == nil || c.Value == nil || c.Why == nil || c.Fix == nil {
			t.Errorf("check with a missing field: %+v", c)
		}
	}
}

// --devices decides whether the disk under Docker's data root counts as
// shaped: by default vda is (a target with throttle); with --devices sd*
// only sda is, and the fix names the flag with vda added.
func TestCheckDevicesDataRoot(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	dh := hosttest.FakeEngine(t, tr.Root, hosttest.Engine{Version: "28.0.0", APIVersion: "1.48", CgroupDriver: "cgroupfs", CgroupVersion: "1",
		StorageDriver: "overlay2", RootDir: "/var/lib/docker"})
	dataRoot := func(args ...string) host.Check {
		t.Helper()
		out, errOut, code := runCheckT(t, append([]string{"--path-sys", tr.Sys, "--path-proc", tr.Proc, "--docker-host", dh, "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var r host.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		if r.DataRoot == nil || strings.Join(r.DataRoot.Devices, " ") != "vda" {
			t.Fatalf("docker_data_root %+v", r.DataRoot)
		}
		for _, c := range r.Checks {
			if c.ID == "docker.data_root" {
				return c
			}
		}
		t.Fatal("no docker.data_root")
		return host.Check{}
	}
	if c := dataRoot(); c.Status != host.StatusOK || !strings.HasSuffix(c.Value, "shaped on vda (throttle)") {
		t.Errorf("default: %+v", c)
	}
	c := dataRoot("--devices", "sd*")
	if c.Status != host.StatusWarn || c.Fix != "add vda to the daemon's devices: --devices sd*,vda (or devices: in its config file)" {
		t.Errorf("--devices sd*: %+v", c)
	}
	// The daemon's config file says the same; --devices overrides it.
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("devices: [\"sd*\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := dataRoot("--config", cfg); c.Status != host.StatusWarn || !strings.Contains(c.Fix, "--devices sd*,vda") {
		t.Errorf("--config with devices sd*: %+v", c)
	}
	if c := dataRoot("--config", cfg, "--devices", "vd*"); c.Status != host.StatusOK {
		t.Errorf("--config overridden by --devices vd*: %+v", c)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("devicez: [sda]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCheckT(t, "--path-sys", tr.Sys, "--path-proc", tr.Proc, "--docker-host", "off", "--config", bad)
	if code != 2 || !strings.Contains(errOut, "devicez: unknown key; did you mean devices?") {
		t.Errorf("bad config: exit %d, stderr %q", code, errOut)
	}
}

// --latency off, or latency: off in the daemon's --config file, skips the
// sensor's probe and says it is off by configuration; on the sample tree
// (no BTF) the probe otherwise says unavailable.
func TestCheckLatencyOff(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	latencyCheck := func(args ...string) host.Check {
		t.Helper()
		out, errOut, code := runCheckT(t, append([]string{"--path-sys", tr.Sys, "--path-proc", tr.Proc, "--docker-host", "off", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
		var r host.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		for _, c := range r.Checks {
			if c.ID == "latency.ebpf" {
				return c
			}
		}
		t.Fatalf("%q: no latency.ebpf", args)
		return host.Check{}
	}
	off := func(c host.Check) bool {
		return c.Status == host.StatusOK && strings.HasPrefix(c.Value, "off by configuration (latency: off)")
	}
	if c := latencyCheck(); c.Status != host.StatusWarn || !strings.HasPrefix(c.Value, "unavailable (no BTF)") {
		t.Errorf("default: %+v", c)
	}
	if c := latencyCheck("--latency", "off"); !off(c) {
		t.Errorf("--latency off: %+v", c)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, []byte("latency: off\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := latencyCheck("--config", cfg); !off(c) {
		t.Errorf("--config with latency: off: %+v", c)
	}
	if c := latencyCheck("--config", cfg, "--latency", "auto"); off(c) {
		t.Errorf("--latency auto over the file's off: %+v", c)
	}
	_, errOut, code := runCheckT(t, "--path-sys", tr.Sys, "--path-proc", tr.Proc, "--docker-host", "off", "--latency", "on")
	if code != 2 || !strings.Contains(errOut, `--latency "on": want auto`) {
		t.Errorf("--latency on: exit %d, stderr %q", code, errOut)
	}
}

func TestCheckUsage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"--bogus"}, 2, "flag provided but not defined: --bogus"},
		{[]string{"--json=maybe"}, 2, `invalid boolean value "maybe" for --json`},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--path-sys", filepath.Join(dir, "nope")}, 2, `--path-sys "` + filepath.Join(dir, "nope") + `": not a directory`},
		{[]string{"--sys", filepath.Join(dir, "nope")}, 2, "--sys is deprecated, use --path-sys"},
		{[]string{"--path-proc"}, 2, "flag needs an argument: --path-proc"},
		{[]string{"--proc"}, 2, "flag needs an argument: --proc"},
		{[]string{"--docker-host", "ftp://x"}, 2, "--docker-host: docker host \"ftp://x\": scheme must be unix, tcp, http or https"},
		{[]string{"--devices", "sd*,[x"}, 2, `--devices "sd*,[x": bad pattern "[x"`},
		{[]string{"--devices", "/dev/sda"}, 2, `bad pattern "/dev/sda": want a device name glob`},
	} {
		_, errOut, code := runCheckT(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("%q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.stderr)
		}
	}
	out, errOut, code := runCheckT(t, "--help")
	if code != 0 || errOut != "" {
		t.Errorf("--help: exit %d, stderr %q", code, errOut)
	}
	for _, s := range []string{"Exit status", "warn", "fail", "--docker-host", "Example"} {
		if !strings.Contains(out, s) {
			t.Errorf("--help lacks %q", s)
		}
	}
}

// TestCheckReal runs `ddiskqos check --json` on this machine around a loop
// device on scheduler none, then bfq.
func TestCheckReal(t *testing.T) {
	testkit.NeedRoot(t)
	layout, err := host.Layout(host.DefaultRoots())
	testkit.Need(t, err == nil, "a cgroup layout: %v", err)
	loop := testkit.LoopDevice(t, 8)
	testkit.SetScheduler(t, loop.Name, "none")

	run := func() host.Report {
		t.Helper()
		out, errOut, code := runCheckT(t, "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var r host.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	dev := func(r host.Report) host.Device {
		for _, d := range r.Devices {
			if d.Name == loop.Name {
				return d
			}
		}
		t.Fatalf("%s not in the report", loop.Name)
		return host.Device{}
	}
	before := run()
	if before.Cgroup.Mode != string(layout.Mode) {
		t.Errorf("mode %q, want %q", before.Cgroup.Mode, layout.Mode)
	}
	if d := dev(before); d.Mechanism != host.MechThrottle || d.Scheduler != "none" {
		t.Errorf("before: %s on %s", d.Mechanism, d.Scheduler)
	}
	if testkit.NoBFQ() {
		// What check tells the operator of a kernel without bfq: no
		// "modprobe bfq", and why.
		if d := dev(before); d.Fix != "" || !strings.Contains(d.Reason, "built without bfq") {
			t.Errorf("kernel without bfq: fix %q, reason %q; want no fix and the reason saying it", d.Fix, d.Reason)
		}
	}
	testkit.SetScheduler(t, loop.Name, "bfq")
	after := run()
	if d := dev(after); d.Mechanism != host.MechBFQWeight || !d.WeightsEffective {
		t.Errorf("after: %s on %s, weights %v", d.Mechanism, d.Scheduler, d.WeightsEffective)
	}
	t.Logf("mode %s; %s: before %s, after %s", before.Cgroup.Mode, loop.Name, dev(before).Mechanism, dev(after).Mechanism)
	for _, c := range after.Checks {
		if strings.HasPrefix(c.ID, "limits.") {
			if c.Value == "" {
				t.Errorf("%s has no value", c.ID)
			}
			t.Logf("%-26s %-4s %s", c.ID, c.Status, c.Value)
		}
		if c.ID == "device."+loop.Name+".mechanism" && c.Status != host.StatusOK {
			t.Errorf("%s: %+v", c.ID, c)
		}
	}
}

// TestCheckBeside: check names what the daemon's configuration runs
// beside each device's mechanism, as the daemon chooses it — level-limit
// where the throttle does not run, and why not where it does.
func TestCheckBeside(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	check := func(config string, id string) (host.Check, bool) {
		t.Helper()
		cfg := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
		out, errOut, code := runCheckT(t, "--path-sys", tr.Sys, "--path-proc", tr.Proc, "--docker-host", "off", "--config", cfg, "--json")
		var r host.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("check --json: %v (exit %d, stderr %q)", err, code, errOut)
		}
		for _, c := range r.Checks {
			if c.ID == id {
				return c, true
			}
		}
		return host.Check{}, false
	}
	const limits = "level_limits: [0, 0, 50MiB, 10MiB]\n"
	if c, _ := check(limits+"throttle_with_weights: false\n", "device.sda.mechanism"); !strings.HasPrefix(c.Value, "bfq-weight+level-limit (") {
		t.Errorf("level-limit beside bfq: %+v", c)
	}
	if c, _ := check(limits, "device.sda.mechanism"); !strings.HasPrefix(c.Value, "bfq-weight+throttle (") {
		t.Errorf("the throttle beside bfq: %+v", c)
	}
	if c, ok := check(limits, "device.sda.level-limit"); !ok || c.Status != host.StatusWarn || !strings.Contains(c.Why, "the throttle runs on sda") {
		t.Errorf("level-limit where the throttle runs: %+v", c)
	}
	if _, ok := check("throttle_with_weights: false\n", "device.sda.level-limit"); ok {
		t.Error("level-limit not turned on, yet checked")
	}
}
