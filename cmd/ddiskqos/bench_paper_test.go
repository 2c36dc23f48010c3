package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/bench/paper"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

func TestBenchPaperUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--quick", "--full"}, "exclude each other"},
		{[]string{"--trials", "-1"}, "--trials -1"},
		{[]string{"--size", "lots"}, `--size "lots"`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--nope"}, "--nope"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if code := runBenchPaper(tc.args, &stdout, &stderr); code != 2 {
				t.Errorf("exit %d, want 2; stderr: %s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr %q does not mention %q", stderr.String(), tc.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if code := runBenchPaper([]string{"--help"}, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "--quick") {
		t.Errorf("--help: exit %d, stdout %q", code, stdout.String())
	}
}

// TestRealBenchPaperQuick runs `ddiskqos bench paper --quick` end to end
// against the real engine and a real loop device, and checks that every
// piece ran and produced numbers — never how fast anything was.
func TestRealBenchPaperQuick(t *testing.T) {
	if testkit.InVM() {
		t.Skip("the Docker engine tests run on the host")
	}
	testkit.NeedRoot(t)
	_, err := exec.LookPath("mkfs.ext4")
	testkit.Need(t, err == nil, "mkfs.ext4 not found: install e2fsprogs")
	c, err := client.New(client.FromEnv)
	testkit.Need(t, err == nil, "docker client: %v", err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err = c.Ping(ctx, client.PingOptions{})
	cancel()
	c.Close()
	testkit.Need(t, err == nil, "docker engine not reachable: %v", err)

	before := benchLeftovers(t)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := runBenchPaper([]string{"--quick", "--out", out, "--json"}, &stdout, &stderr)
	t.Logf("bench paper --quick took %s; progress:\n%s", time.Since(start).Round(time.Second), stderr.String())
	if host.BuiltWithoutBFQ(host.DefaultRoots()) {
		// Refused at once, saying why, having made nothing.
		if code == 0 || !strings.Contains(stderr.String(), "built without bfq") || time.Since(start) > 5*time.Second {
			t.Fatalf("kernel without bfq: exit %d after %s, stderr %q: want a refusal at once that says why", code, time.Since(start), stderr.String())
		}
		if after := benchLeftovers(t); !slices.Equal(before, after) {
			t.Errorf("leftovers after the refusal: %v, before %v", after, before)
		}
		t.Skip("this kernel is built without bfq (/proc/config.gz: CONFIG_IOSCHED_BFQ is not set): the paper's bench compares bfq's weights; its refusal checked")
	}
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var rep struct {
		paper.Result
		Summary paper.Summary `json:"summary"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("JSON report: %v", err)
	}
	type key struct{ cfg, scenario, reader string }
	got := map[key]int{}
	for _, s := range rep.Samples {
		if s.Seconds <= 0 || s.Bytes <= 0 {
			t.Errorf("sample without numbers: %+v", s)
		}
		if s.Scenario == "interactive" && (s.Latency == nil || s.Latency.P50 <= 0 || s.Latency.P999 < s.Latency.P50) {
			t.Errorf("interactive sample without latency percentiles: %+v", s)
		}
		got[key{s.Config, s.Scenario, s.Reader}]++
	}
	for _, cfg := range append([]string{paper.CfgIdle}, paper.Compared...) {
		for _, size := range rep.Plan.Sizes {
			if k := (key{cfg, "table3", sizeName(size)}); got[k] == 0 {
				t.Errorf("no Table 3 read for %+v", k)
			}
		}
		for _, r := range rep.Plan.Table5 {
			if k := (key{cfg, "table5", r.Label()}); got[k] == 0 {
				t.Errorf("no Table 5 read for %+v", k)
			}
		}
		if k := (key{cfg, "interactive", "4k-rand"}); got[k] == 0 {
			t.Errorf("no interactive run for %s", cfg)
		}
	}
	phases := map[string]paper.Phase{}
	for _, p := range rep.Phases {
		phases[p.Config] = p
	}
	if p := phases[paper.CfgSolo]; p.BulkQuietBps <= 0 {
		t.Errorf("solo phase without bulk throughput: %+v", p)
	}
	for _, cfg := range paper.Compared {
		p, ok := phases[cfg]
		if !ok {
			t.Errorf("no phase %s", cfg)
			continue
		}
		if p.BulkContentionBps <= 0 || p.BulkQuietBps <= 0 {
			t.Errorf("%s: bulk throughput missing: %+v", cfg, p)
		}
		daemon := cfg == paper.CfgDdiskqos || cfg == paper.CfgPaper
		if daemon && (p.Daemon == nil || p.Daemon.Ticks == 0 || p.Daemon.Mechanism == "") {
			t.Errorf("%s: the daemon did not run: %+v", cfg, p.Daemon)
		}
		if daemon && p.Daemon != nil && len(p.Daemon.Errors) > 0 {
			t.Errorf("%s: daemon errors %v", cfg, p.Daemon.Errors)
		}
		if !daemon || p.Daemon == nil {
			continue
		}
		t.Logf("%s: daemon %+v", cfg, *p.Daemon)
		// What it decided, not only that it ticked: it tracked the bulk
		// container and every gated reader, demoted the bulk container,
		// and put a weight or a cap in force on it.
		if min := 1 + len(rep.Plan.Sizes); p.Daemon.Tracked < min {
			t.Errorf("%s: the daemon tracked %d containers, want at least %d (bulk and the Table 3 readers)", cfg, p.Daemon.Tracked, min)
		}
		if b := p.Daemon.Bulk; b.MaxLevel < 2 || (b.Weight == 0 && !b.Capped) {
			t.Errorf("%s: bulk container not demoted and limited: %+v", cfg, b)
		}
	}
	// The readers were tracked before their release: every Table 3
	// sample of a daemon phase names a level.
	for _, s := range rep.Samples {
		if (s.Config == paper.CfgDdiskqos || s.Config == paper.CfgPaper) && s.Scenario == "table3" && !strings.HasPrefix(s.Daemon, "level ") {
			t.Errorf("%s %s %s: the daemon's view at release is %q, want a level", s.Config, s.Scenario, s.Reader, s.Daemon)
		}
	}
	if len(rep.Summary.Bar) != 4 {
		t.Errorf("bar checks = %+v, want 4", rep.Summary.Bar)
	}
	for _, f := range []string{"paper.md", "paper.svg", "paper.json"} {
		b, err := os.ReadFile(filepath.Join(out, f))
		if err != nil || len(b) == 0 {
			t.Errorf("%s: %v (%d bytes)", f, err, len(b))
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, "paper.md"))
	for _, want := range []string{"## Table 3", "## Table 5", "## Interactive", "## Bulk container", "## The bar"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("paper.md lacks %q", want)
		}
	}
	// Nothing left behind: no container of the run, no loop device of it.
	for _, l := range benchLeftovers(t) {
		if !slices.Contains(before, l) {
			t.Errorf("left by the bench: %s", l)
		}
	}
}

func sizeName(n int64) string { return strings.TrimSuffix(paper.Reader{Size: n}.Label(), "@0s") }

// benchLeftovers lists the paper bench's loop devices and containers on
// the host. The test compares the lists before and after its run, so what
// an earlier, killed run left does not count against this one.
func benchLeftovers(t *testing.T) []string {
	t.Helper()
	var got []string
	out, err := exec.Command("losetup", "-a").CombinedOutput()
	if err != nil {
		t.Fatalf("losetup -a: %v: %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "ddiskqos-bench-paper-") {
			got = append(got, "loop device "+strings.TrimSpace(l))
		}
	}
	out, err = exec.Command("docker", "ps", "-a", "--filter", "label="+paper.LabelRun, "--format", "{{.Names}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	for _, n := range strings.Fields(string(out)) {
		got = append(got, "container "+n)
	}
	return got
}
