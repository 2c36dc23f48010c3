package main

// The churn soak of issue 18: the real `ddiskqos run` binary, metrics and
// API on as in production, beside a streamer, while short-lived workloads
// appear and vanish at tens per second (v1 blkio cgroups) or several per
// second (Docker containers), with kill -9 and restarts in between as
// systemd's Restart=always would do. The daemon must never exit on its own
// (the panic of issue 18 did, within seconds), /healthz must answer 200 on
// every sample of a life that came up, its descriptors, goroutines and
// memory must not grow with the churn, and after the final SIGTERM every
// surviving cgroup's blkio files must read as before the first start.
//
// The daemon runs with the production defaults (a 1 s tick: /healthz calls
// the loop stale after 4 s). With a 100 ms tick (stale after 1.3 s) a
// loaded 2-core machine (load average 40+) starved the loop for 1.7 s once
// in five runs; the panic of issue 18 showed within 5-25 s at either tick.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// supervised is the daemon as systemd runs it: started again after each
// kill -9 of ours; any other exit is a failure of the test.
type supervised struct {
	t    *testing.T
	bin  string
	args []string
	env  []string
	addr string

	cmd    *exec.Cmd
	logs   *testkit.SyncBuffer
	exited chan error // the running life's Wait, once
	lives  int
	// allLogs is every life's log, for the WARN count and the failure
	// report.
	allLogs []*testkit.SyncBuffer
	http    *http.Client
}

func newSupervised(t *testing.T, bin, addr string, env []string, args ...string) *supervised {
	s := &supervised{t: t, bin: bin, args: args, env: env, addr: addr,
		http: &http.Client{Timeout: 10 * time.Second}}
	t.Cleanup(func() {
		if s.cmd != nil && s.cmd.ProcessState == nil {
			s.cmd.Process.Kill()
			<-s.exited
		}
		if t.Failed() && s.logs != nil {
			t.Logf("last daemon life's log (tail):\n%s", tail(s.logs.String(), 60))
		}
	})
	return s
}

// start starts a life and waits until its /healthz answers 200.
func (s *supervised) start() {
	s.t.Helper()
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = s.env
	logs := &testkit.SyncBuffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.cmd, s.logs, s.exited = cmd, logs, exited
	s.lives++
	s.allLogs = append(s.allLogs, logs)
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			s.t.Fatalf("daemon life %d exited while starting (%v):\n%s", s.lives, err, tail(logs.String(), 60))
		default:
		}
		if code, _, err := s.get("/healthz"); err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("daemon life %d: /healthz not 200 within 60 s:\n%s", s.lives, tail(logs.String(), 60))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkAlive fails the test when the daemon exited on its own.
func (s *supervised) checkAlive() {
	s.t.Helper()
	select {
	case err := <-s.exited:
		s.exited <- err
		log := s.logs.String()
		if i := strings.Index(log, "panic:"); i >= 0 { // Go's own report
			log = log[i:]
		} else if i := strings.Index(log, "panicked"); i >= 0 { // run's (exit 3)
			log = log[strings.LastIndex(log[:i], "\n")+1:]
		} else {
			log = tail(log, 60)
		}
		s.t.Fatalf("daemon life %d exited on its own (%v), not by our kill:\n%s", s.lives, err, log)
	default:
	}
}

// kill9 kills the running life as a crash would, and starts the next.
func (s *supervised) kill9() {
	s.t.Helper()
	s.checkAlive()
	s.cmd.Process.Kill()
	<-s.exited
	s.start()
}

// term stops the running life with SIGTERM and returns its exit code.
func (s *supervised) term() int {
	s.t.Helper()
	s.checkAlive()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(60 * time.Second):
		s.t.Fatalf("daemon did not exit within 60 s of SIGTERM:\n%s", tail(s.logs.String(), 60))
	}
	return s.cmd.ProcessState.ExitCode()
}

func (s *supervised) get(path string) (int, string, error) {
	resp, err := s.http.Get("http://" + s.addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// usage is one sample of the running life's resources.
type usage struct {
	fds, goroutines int
	rss             int64 // bytes
}

func (u usage) String() string {
	return fmt.Sprintf("%d fds, %d goroutines, %.1f MiB RSS", u.fds, u.goroutines, float64(u.rss)/(1<<20))
}

// sample asks /healthz (it must be 200) and reads the life's descriptors
// and RSS from /proc and its goroutines from /metrics.
func (s *supervised) sample() usage {
	s.t.Helper()
	s.checkAlive()
	code, body, err := s.get("/healthz")
	if err != nil || code != http.StatusOK {
		s.checkAlive()
		s.t.Fatalf("daemon life %d: /healthz %d %q (%v)", s.lives, code, strings.TrimSpace(body), err)
	}
	var u usage
	pid := s.cmd.Process.Pid
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		s.checkAlive()
		s.t.Fatal(err)
	}
	u.fds = len(ents)
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		s.t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(st), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			u.rss = kb << 10
		}
	}
	code, m, err := s.get("/metrics")
	if err != nil || code != http.StatusOK {
		s.t.Fatalf("daemon life %d: /metrics %d (%v)", s.lives, code, err)
	}
	for line := range strings.SplitSeq(m, "\n") {
		if v, ok := strings.CutPrefix(line, "go_goroutines "); ok {
			u.goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if u.goroutines == 0 {
		s.t.Fatalf("no go_goroutines in /metrics")
	}
	return u
}

// warns counts the WARN and ERROR lines of every life, those saying a cap
// was not applied because the cgroup was gone, and each message.
func (s *supervised) warns() (all, gone int, msgs map[string]int, example map[string]string) {
	msgs, example = map[string]int{}, map[string]string{}
	for _, l := range s.allLogs {
		for line := range strings.SplitSeq(l.String(), "\n") {
			if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
				all++
				msg := line
				if i := strings.Index(line, "msg="); i >= 0 {
					msg = line[i:]
					if j := strings.Index(msg, "\" "); j >= 0 {
						msg = msg[:j+1]
					}
				}
				if msgs[msg]++; msgs[msg] == 1 {
					example[msg] = line
				}
				if strings.Contains(line, "not applied") && strings.Contains(line, "gone") {
					gone++
				}
			}
		}
	}
	return all, gone, msgs, example
}

// logWarns logs the WARN and ERROR lines of every life, their number per
// minute and each message's count, and fails when there are more than a
// few per minute: a workload that goes is no warning (issue 18 item 6:
// 1,331 "cap not applied ... cgroup gone" WARNs in 5 minutes; 14-68 in each
// 2-minute run here before that line became DEBUG, and 8-10 "apply levels"
// WARNs before a knob read's ENODEV meant a gone cgroup).
func logWarns(t *testing.T, s *supervised, took time.Duration) {
	t.Helper()
	all, gone, msgs, example := s.warns()
	perMin := float64(all) / took.Minutes()
	t.Logf("WARN/ERROR lines: %d in all lives (%.1f/min), of which %d 'not applied ... gone'", all, perMin, gone)
	for m, n := range msgs {
		t.Logf("  %4d × %s, e.g.\n        %s", n, m, example[m])
	}
	if perMin > 3 {
		t.Errorf("%.1f WARN/ERROR lines per minute of churn, want at most 3", perMin)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// soakPlan is the shape of one soak: a first stretch with kill -9s at
// random moments, then a last life long enough to compare its resources
// early and late.
type soakPlan struct {
	killPhase  time.Duration
	killEvery  [2]time.Duration // a kill at a random moment in this range after the last start
	lastLife   time.Duration
	warm       time.Duration // of the last life before its early sample
	sampleEach time.Duration
}

type soakResult struct {
	samples     int
	early, late usage
	lastLife    time.Duration
}

// soak runs plan against s, whose first life is started here; churn runs
// beside it (the caller's). It returns after the last life's late sample,
// with the daemon still running.
func soak(t *testing.T, s *supervised, plan soakPlan) soakResult {
	t.Helper()
	var res soakResult
	s.start()
	end := time.Now().Add(plan.killPhase)
	next := func() time.Time {
		return time.Now().Add(plan.killEvery[0] + rand.N(plan.killEvery[1]-plan.killEvery[0]))
	}
	killAt := next()
	for time.Now().Before(end) {
		time.Sleep(plan.sampleEach)
		s.sample()
		res.samples++
		if time.Now().After(killAt) {
			s.kill9()
			t.Logf("kill -9 of life %d at %s; life %d up", s.lives-1, time.Since(end.Add(-plan.killPhase)).Round(time.Second), s.lives)
			killAt = next()
		}
	}
	s.kill9()
	lastStart := time.Now()
	lastEnd := lastStart.Add(plan.lastLife)
	early := false
	for time.Now().Before(lastEnd) {
		time.Sleep(plan.sampleEach)
		u := s.sample()
		res.samples++
		if !early && time.Since(lastStart) >= plan.warm {
			res.early, early = u, true
		}
		res.late = u
	}
	res.lastLife = time.Since(lastStart)
	return res
}

// checkGrowth fails when the last life's late sample grew past generous
// bounds over its early one: a leak per workload seen would add thousands.
func checkGrowth(t *testing.T, r soakResult) {
	t.Helper()
	t.Logf("last life (%s): early %s; late %s", r.lastLife.Round(time.Second), r.early, r.late)
	if r.late.fds > r.early.fds+32 {
		t.Errorf("descriptors grew from %d to %d in one life", r.early.fds, r.late.fds)
	}
	if r.late.goroutines > r.early.goroutines+32 {
		t.Errorf("goroutines grew from %d to %d in one life", r.early.goroutines, r.late.goroutines)
	}
	if r.late.rss > r.early.rss*3/2+32<<20 {
		t.Errorf("RSS grew from %.1f to %.1f MiB in one life", float64(r.early.rss)/(1<<20), float64(r.late.rss)/(1<<20))
	}
}

// checkNoErrors fails when the running life counted errors of its loop
// (ddiskqos_scan_errors_total): a cgroup or container that goes is a
// normal event, never a failure to read counters or write a knob.
func checkNoErrors(t *testing.T, s *supervised) {
	t.Helper()
	code, m, err := s.get("/metrics")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/metrics %d (%v)", code, err)
	}
	n := 0
	for line := range strings.SplitSeq(m, "\n") {
		if !strings.HasPrefix(line, "ddiskqos_scan_errors_total{") {
			continue
		}
		n++
		t.Logf("last life: %s", line)
		if !strings.HasSuffix(line, " 0") {
			t.Errorf("the last life counted errors under churn: %s", line)
		}
	}
	if n == 0 {
		t.Errorf("no ddiskqos_scan_errors_total in /metrics")
	}
}

// blkioFiles reads every blkio file of cgroup dir that ddiskqos may write
// (weights and throttle limits), by name.
func blkioFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "blkio.") || !(strings.Contains(n, "weight") ||
			strings.HasPrefix(n, "blkio.throttle.") && strings.HasSuffix(n, "_device")) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatalf("read %s: %v", filepath.Join(dir, n), err)
		}
		out[n] = string(b)
	}
	if len(out) == 0 {
		t.Fatalf("no blkio weight or throttle files in %s", dir)
	}
	return out
}

// checkRestored compares the surviving cgroups' files with before.
func checkRestored(t *testing.T, before map[string]map[string]string) {
	t.Helper()
	for dir, files := range before {
		now := blkioFiles(t, dir)
		for n, v := range files {
			if now[n] != v {
				t.Errorf("after the final SIGTERM %s/%s is %q, was %q before the first start", dir, n, now[n], v)
			}
		}
	}
}

// checkStateFile: after a clean exit the state file holds no originals.
func checkStateFile(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Originals []json.RawMessage `json:"originals"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("state file %s after the final SIGTERM: %v\n%s", path, err, b)
	}
	if len(st.Originals) != 0 {
		t.Errorf("state file after the final SIGTERM holds %d originals:\n%s", len(st.Originals), b)
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".state-*.tmp"))
	if len(left) > 0 {
		t.Logf("left in the state dir: %v (issue 18 item 5, the lead's)", left)
	}
}

// waitWorkloads waits until the daemon tracks exactly want workloads (the
// survivors, once the churn stopped): none of the churned ones is kept.
func waitWorkloads(t *testing.T, r *runRig, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := r.snapshot()
		if err == nil && len(s.Workloads) == want {
			return
		}
		if time.Now().After(deadline) {
			n := -1
			if s != nil {
				n = len(s.Workloads)
			}
			t.Fatalf("30 s after the churn stopped the daemon tracks %d workloads (err %v), want the %d survivors", n, err, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// churnCounter counts what the churn did.
type churnCounter struct {
	made, failed atomic.Int64
	firstErr     atomic.Pointer[string]
}

func (c *churnCounter) fail(err error) {
	c.failed.Add(1)
	s := err.Error()
	c.firstErr.CompareAndSwap(nil, &s)
}

// report logs the churn and fails when fewer than least were made: the
// churn is the test's load, and too little of it proves nothing. The
// floor is far below what a quiet machine makes, so that the soak holds
// beside other packages' tests.
func (c *churnCounter) report(t *testing.T, what string, took time.Duration, least int64) {
	t.Helper()
	made, failed := c.made.Load(), c.failed.Load()
	rate := float64(made) / took.Seconds()
	t.Logf("churn: %d %s in %s (%.1f/s), %d failed", made, what, took.Round(time.Second), rate, failed)
	if e := c.firstErr.Load(); e != nil {
		t.Logf("churn: first failure: %s", *e)
	}
	if made < least {
		t.Errorf("churn of %d %s, want at least %d for the soak to mean anything", made, what, least)
	}
	if failed > made/10 {
		t.Errorf("%d of %d churned %s failed", failed, made+failed, what)
	}
}

// TestRealV1ChurnSoak: ~2 minutes of v1 blkio cgroups appearing and
// vanishing at ~30/s under the daemon's parent (each with a dd that reads
// 256 KiB of the loop device, direct, then exits; one in eight reads 4 MiB,
// is demoted and capped, and goes soon after; a quarter of them under names
// used before, so a path comes back with a new inode), beside a
// streamer at queue depth 8 that is demoted and capped, with a kill -9 of
// the daemon at random every 10-20 s for 60 s and a last life of 60 s.
// Before the fix of issue 18 the daemon panicked within seconds of churn.
func TestRealV1ChurnSoak(t *testing.T) {
	r := newRunRig(t)
	startAll := time.Now()
	// The survivors: a streamer, one with a BFQ weight of its own, one
	// with throttle limits of its own (what ddiskqos must put back).
	streamer, weighted, capped := r.child(t, "streamer"), r.child(t, "weighted"), r.child(t, "capped")
	wp, _ := r.h.Path(weighted)
	if err := r.ownWeight(wp, 300); err != nil {
		t.Fatal(err)
	}
	cp, _ := r.h.Path(capped)
	if err := os.WriteFile(filepath.Join(cp, "blkio.throttle.read_bps_device"), []byte(r.loop.Dev()+" 734003200"), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cp, "blkio.throttle.write_iops_device"), []byte(r.loop.Dev()+" 9000"), 0); err != nil {
		t.Fatal(err)
	}
	before := map[string]map[string]string{}
	for _, cg := range []string{r.parent, streamer, weighted, capped} {
		p, _ := r.h.Path(cg)
		before[p] = blkioFiles(t, p)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() }) // before the rig's cgroups and loop device go
	sp, err := workload.StartIn(ctx, r.bin, nil, []string{"workload", "--wait-stdin", "--json", "--direct", "--iodepth", "8",
		"--loop", "read", r.loop.Path}, func(pid int) error { return r.h.AddProcess(streamer, pid) })
	if err != nil {
		t.Fatal(err)
	}
	wg.Go(func() { <-ctx.Done(); sp.Stop(); sp.Wait() })

	// The churn: a ticket every 33 ms (30/s), taken by 8 workers.
	var cc churnCounter
	tickets := make(chan struct{})
	wg.Go(func() {
		tk := time.NewTicker(33 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				close(tickets)
				return
			case <-tk.C:
				select {
				case tickets <- struct{}{}:
				default: // the workers are behind: the rate is what they make
				}
			}
		}
	})
	var seq atomic.Int64
	blocks := 512 * 16 // of 64 KiB in the 512 MiB loop device
	for range 8 {
		wg.Go(func() {
			for range tickets {
				n := seq.Add(1)
				name := fmt.Sprintf("churn-%d", n)
				if n%4 == 0 {
					name = fmt.Sprintf("again-%d", n%16) // the same path, a new inode
				}
				count := 4 // 256 KiB: stays at level 1
				if n%8 == 1 {
					count = 64 // 4 MiB: demoted past the 2 MiB threshold, capped beside level 1, gone soon after
				}
				if err := churnCgroup(r, name, count, rand.N(blocks-count)); err != nil {
					cc.fail(err)
					continue
				}
				cc.made.Add(1)
			}
		})
	}

	s := newSupervised(t, r.bin, r.addr, r.env(), "run", "--source", "cgroup", "--cgroup-parent", r.parent,
		"--listen", r.addr, "--state-file", r.state, "--devices", r.loop.Name)
	churnStart := time.Now()
	res := soak(t, s, soakPlan{killPhase: 60 * time.Second, killEvery: [2]time.Duration{10 * time.Second, 20 * time.Second},
		lastLife: 60 * time.Second, warm: 15 * time.Second, sampleEach: 500 * time.Millisecond})
	stop()
	wg.Wait()
	churnTook := time.Since(churnStart)
	// ~30/s wanted, 20-30/s made beside other tests (load up to 48). On
	// a05a478, before the fix of issue 18, the daemon panicked within 5-30
	// s of churn in each of five runs (100 ms and 1 s ticks).
	cc.report(t, "cgroups", churnTook, 600)
	t.Logf("%d daemon lives (%d kill -9), %d /healthz samples, every one 200", s.lives, s.lives-1, res.samples)
	checkGrowth(t, res)
	checkNoErrors(t, s)
	waitWorkloads(t, r, 3)
	if code := s.term(); code != 0 {
		t.Errorf("final SIGTERM: exit %d, want 0:\n%s", code, tail(s.logs.String(), 30))
	}
	checkRestored(t, before)
	checkStateFile(t, r.state)
	logWarns(t, s, churnTook)
	t.Logf("soak took %s in all", time.Since(startAll).Round(time.Second))
}

// churnCgroup makes cgroup name under the rig's parent, runs in it a dd
// that reads count 64 KiB blocks of the loop device from block skip, and
// removes the cgroup once the dd exited.
func churnCgroup(r *runRig, name string, count, skip int) error {
	p, _ := r.h.Path(r.parent + "/" + name)
	if err := os.Mkdir(p, 0o755); err != nil {
		return err
	}
	script := fmt.Sprintf("echo $$ > %s/cgroup.procs && exec dd if=%s of=/dev/null bs=64k count=%d skip=%d iflag=direct status=none",
		p, r.loop.Path, count, skip)
	out, runErr := exec.Command("sh", "-c", script).CombinedOutput()
	var err error
	for range 100 {
		if err = os.Remove(p); err == nil || errors.Is(err, os.ErrNotExist) {
			err = nil
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if runErr != nil {
		return fmt.Errorf("dd in %s: %v: %s", name, runErr, out)
	}
	return err
}

// TestRealDockerChurnSoak: the same with --source docker on a private
// engine: containers that read 256 KiB of the loop device and exit,
// started and removed by 6 workers (several per second), beside a
// streaming container and a quiet one with a weight and a cap of its own; a
// kill -9 at random every 10-20 s for 30 s, then a last life of 45 s.
func TestRealDockerChurnSoak(t *testing.T) {
	r := newRunRig(t)
	startAll := time.Now()
	e := dockertest.StartEngine(t)
	c := e.Client(t)
	image := e.Image(t)
	dev := []dockertest.Device{{Host: r.loop.Path}}
	surv := dockertest.RunContainers(t, c,
		dockertest.RunOptions{Image: image, Devices: dev, NetworkDisabled: true,
			Args: []string{"workload", "--direct", "--iodepth", "8", "--loop", "read", r.loop.Path}},
		dockertest.RunOptions{Image: image, Devices: dev, NetworkDisabled: true,
			Args: []string{"workload", "--direct", "--iops", "2", "--duration", "1h", "randread", r.loop.Path}})
	before := map[string]map[string]string{}
	for i, ct := range surv {
		p, _ := r.h.Path(e.CgroupParent() + "/" + ct.ID)
		if i == 1 {
			// An operator's own weight and cap (docker run --blkio-weight
			// is refused on v1 with BFQ): what ddiskqos must put back.
			if err := r.ownWeight(p, 300); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(p, "blkio.throttle.read_bps_device"), []byte(r.loop.Dev()+" 734003200"), 0); err != nil {
				t.Fatal(err)
			}
		}
		before[p] = blkioFiles(t, p)
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { stop(); wg.Wait() })
	var cc churnCounter
	var seq atomic.Int64
	for range 6 {
		wg.Go(func() {
			for ctx.Err() == nil {
				n := seq.Add(1)
				if err := churnContainer(c, image, r, fmt.Sprintf("ddiskqos-churn-%d-%d", os.Getpid(), n), t.Name()); err != nil {
					if ctx.Err() == nil {
						cc.fail(err)
					}
					continue
				}
				cc.made.Add(1)
			}
		})
	}

	s := newSupervised(t, r.bin, r.addr, r.env(), "run", "--source", "docker", "--docker-host", e.Host(),
		"--listen", r.addr, "--state-file", r.state, "--devices", r.loop.Name)
	churnStart := time.Now()
	res := soak(t, s, soakPlan{killPhase: 30 * time.Second, killEvery: [2]time.Duration{10 * time.Second, 20 * time.Second},
		lastLife: 45 * time.Second, warm: 10 * time.Second, sampleEach: 500 * time.Millisecond})
	stop()
	wg.Wait()
	churnTook := time.Since(churnStart)
	// 0.9-1.6/s made on this 2-core machine beside other tests (its
	// container starts are CPU-bound); before the fix of issue 18 the panic
	// came after about 10 containers.
	cc.report(t, "containers", churnTook, 30)
	t.Logf("%d daemon lives (%d kill -9), %d /healthz samples, every one 200", s.lives, s.lives-1, res.samples)
	checkGrowth(t, res)
	checkNoErrors(t, s)
	for _, ct := range surv {
		dockertest.WaitRunning(t, c, ct.ID, time.Second) // fails, with its logs, when it exited
	}
	waitWorkloads(t, r, len(surv))
	if code := s.term(); code != 0 {
		t.Errorf("final SIGTERM: exit %d, want 0:\n%s", code, tail(s.logs.String(), 30))
	}
	checkRestored(t, before)
	checkStateFile(t, r.state)
	logWarns(t, s, churnTook)
	t.Logf("soak took %s in all (engine start and image import included)", time.Since(startAll).Round(time.Second))
}

// churnContainer runs one container that reads 256 KiB of the loop device
// and exits, then removes it.
func churnContainer(c *client.Client, image string, r *runRig, name, test string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	off := rand.N(int64(500 << 20))
	cr, err := c.ContainerCreate(ctx, client.ContainerCreateOptions{Name: name,
		Config: &container.Config{Image: image, NetworkDisabled: true, Labels: map[string]string{dockertest.LabelTest: test},
			Cmd: []string{"workload", "--direct", "--bytes", "256KiB", "--offset", strconv.FormatInt(off&^4095, 10), "read", r.loop.Path}},
		HostConfig: &container.HostConfig{NetworkMode: "none", Resources: container.Resources{
			Devices: []container.DeviceMapping{{PathOnHost: r.loop.Path, PathInContainer: r.loop.Path, CgroupPermissions: "rwm"}}}}})
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	defer func() {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		defer rcancel()
		if _, err := c.ContainerRemove(rctx, cr.ID, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "remove churn container %s: %v\n", name, err)
		}
	}()
	wait := c.ContainerWait(ctx, cr.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := c.ContainerStart(ctx, cr.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	select {
	case res := <-wait.Result:
		if res.StatusCode != 0 {
			return fmt.Errorf("%s exited %d", name, res.StatusCode)
		}
	case err := <-wait.Error:
		return fmt.Errorf("wait %s: %w", name, err)
	}
	return nil
}
