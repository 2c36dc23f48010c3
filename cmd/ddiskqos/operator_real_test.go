package main

// The operator's side of the fault matrix on the real binary: what the
// daemon says at start and on SIGHUP (see run_real_test.go for the rig).

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/dockertest"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// startLogged is runRig.start with the log kept for the test to read; args
// replace the rig's defaults.
func (r *runRig) startLogged(t *testing.T, args ...string) (*exec.Cmd, *testkit.SyncBuffer) {
	t.Helper()
	// --policy paper: see runRig.start.
	return r.launch(t, append([]string{"run", "--source", "cgroup", "--cgroup-parent", r.parent, "--policy", "paper",
		"--state-file", r.state, "--devices", r.loop.Name}, args...)...)
}

// waitLog waits until the log holds a line containing every one of parts,
// and returns that line.
func waitLog(t *testing.T, logs *testkit.SyncBuffer, within time.Duration, parts ...string) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for line := range strings.SplitSeq(logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q within %s", parts, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRealRunWarnsListenBeyondLoopback: --listen on every address logs a
// WARN naming the address and the missing authentication; loopback does not.
func TestRealRunWarnsListenBeyondLoopback(t *testing.T) {
	r := newRunRig(t)
	_, port, _ := net.SplitHostPort(r.addr)
	wide := "0.0.0.0:" + port
	d, logs := r.startLogged(t, "--interval", "100ms", "--listen", wide)
	line := waitLog(t, logs, 10*time.Second, "level=WARN", "no authentication")
	if !strings.Contains(line, "addr="+wide) {
		t.Errorf("warning does not name %s: %s", wide, line)
	}
	t.Logf("run --listen %s: %s", wide, line)
	waitLog(t, logs, 10*time.Second, "api listening")
	stopWith(t, d, syscall.SIGTERM)

	d, logs = r.startLogged(t, "--interval", "100ms", "--listen", r.addr)
	waitLog(t, logs, 10*time.Second, "api listening", "addr="+r.addr)
	stopWith(t, d, syscall.SIGTERM)
	if strings.Contains(logs.String(), "no authentication") {
		t.Errorf("warned for loopback %s:\n%s", r.addr, logs)
	}

	var help bytes.Buffer
	if code := runDaemon([]string{"--help"}, &help, &help); code != 0 {
		t.Fatalf("run --help: exit %d", code)
	}
	if h := strings.Join(strings.Fields(help.String()), " "); !strings.Contains(h, "The API has no authentication") {
		t.Errorf("run --help does not say the API has no authentication:\n%s", help.String())
	}
}

// TestRealRunReloadAppliesOrNames: on SIGHUP the interval and the log
// level change in the running daemon (the tick rate and which lines are
// logged show it), and dry_run, which needs a restart, is named as such
// and is not claimed as applied.
func TestRealRunReloadAppliesOrNames(t *testing.T) {
	r := newRunRig(t)
	conf := filepath.Join(t.TempDir(), "ddiskqos.yaml")
	write := func(body string) {
		t.Helper()
		if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hup := func(d *exec.Cmd) {
		t.Helper()
		if err := d.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	// tickRate is the ticks per second over one second, and the interval
	// the snapshot reports.
	tickRate := func() (float64, time.Duration) {
		t.Helper()
		a, err := r.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond)
		b, err := r.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return float64(b.Tick-a.Tick) / b.At.Sub(a.At).Seconds(), b.Interval
	}
	// tracked waits until the snapshot has a workload of that name.
	tracked := func(name string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if s, err := r.snapshot(); err == nil {
				for _, w := range s.Workloads {
					if w.Name == name {
						return
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s never tracked", name)
	}

	write("interval: 500ms\nlog: {level: info}\n")
	d, logs := r.startLogged(t, "--config", conf, "--listen", r.addr)
	r.child(t, "a")
	tracked("a")
	waitLog(t, logs, 5*time.Second, "level=INFO", `msg="tracking workload"`, "workload=a")
	slow, iv := tickRate()
	t.Logf("interval 500ms: %.1f ticks/s, snapshot interval %s", slow, iv)
	if iv != 500*time.Millisecond || slow > 3 {
		t.Fatalf("before reload: %.1f ticks/s, interval %s; want <= 3/s at 500ms", slow, iv)
	}

	// Faster ticks, INFO hidden, dry_run asked for.
	write("interval: 100ms\nlog: {level: warn}\ndry_run: true\n")
	hup(d)
	line := waitLog(t, logs, 5*time.Second, `msg="reloaded configuration"`)
	t.Logf("reload: %s", line)
	if !strings.Contains(line, "applied=interval,log.level") || strings.Contains(line, "dry_run") {
		t.Errorf("reload line does not list exactly what was applied: %s", line)
	}
	line = waitLog(t, logs, 5*time.Second, "level=WARN", "need a restart")
	t.Logf("reload: %s", line)
	if !strings.Contains(line, "keys=dry_run") {
		t.Errorf("restart warning does not name dry_run: %s", line)
	}
	time.Sleep(300 * time.Millisecond) // the loop takes the interval after its next tick
	fast, iv := tickRate()
	t.Logf("after SIGHUP to interval 100ms: %.1f ticks/s, snapshot interval %s", fast, iv)
	if iv != 100*time.Millisecond || fast < 6 {
		t.Errorf("after reload: %.1f ticks/s, interval %s; want >= 6/s at 100ms", fast, iv)
	}
	if s, err := r.snapshot(); err != nil || s.DryRun {
		t.Errorf("dry_run needs a restart, yet the snapshot says dry-run %v (%v)", s != nil && s.DryRun, err)
	}
	r.child(t, "b")
	tracked("b")
	time.Sleep(200 * time.Millisecond)
	if strings.Contains(logs.String(), "workload=b") {
		t.Errorf("at log level warn, INFO lines about b were logged")
	}

	// Back to debug: INFO (and DEBUG) lines show again.
	write("interval: 100ms\nlog: {level: debug}\ndry_run: true\n")
	hup(d)
	// c only after the reload took: tracked before it, its INFO line
	// would still be hidden (seen under load). The first INFO line logged
	// at the new level is the policy's (hidden at warn before).
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(logs.String(), `msg="policy reconfigured"`); {
		if time.Now().After(deadline) {
			t.Fatalf("the reload back to debug was never logged")
		}
		time.Sleep(20 * time.Millisecond)
	}
	r.child(t, "c")
	tracked("c")
	waitLog(t, logs, 5*time.Second, "level=INFO", `msg="tracking workload"`, "workload=c")
	stopWith(t, d, syscall.SIGTERM)
}

// httpGet returns the status and body of GET url.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue is the value of the exposition line that starts with series.
func metricValue(t *testing.T, body, series string) string {
	t.Helper()
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("no series %s in /metrics", series)
	return ""
}

// TestRealRunDockerEngineLost: the real binary on a private dockerd. With
// the engine down at start, and when it goes away mid-run, the daemon keeps
// running degraded and says so everywhere an operator looks: /healthz 503
// with the reason, ddiskqos_source_up 0 and a growing
// ddiskqos_source_errors_total, one WARN. When the engine is back, all turn
// healthy again.
func TestRealRunDockerEngineLost(t *testing.T) {
	r := newRunRig(t)
	e := dockertest.StartEngine(t)
	stopped := e.Stop(t)
	t.Logf("private engine stopped in %s", stopped.Round(time.Millisecond))

	d, logs := r.launch(t, "run", "--source", "docker", "--docker-host", e.Host(), "--interval", "100ms",
		"--listen", r.addr, "--state-file", r.state, "--devices", r.loop.Name)
	base := "http://" + r.addr
	// health waits until /healthz answers want, and returns its body.
	health := func(want int, within time.Duration) string {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			resp, err := http.Get(base + "/healthz")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == want {
					return strings.TrimSpace(string(b))
				}
				if time.Now().After(deadline) {
					t.Fatalf("/healthz %d %q, want %d", resp.StatusCode, b, want)
				}
			} else if time.Now().After(deadline) {
				t.Fatalf("/healthz: %v", err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	degraded := func(phase string) {
		t.Helper()
		body := health(http.StatusServiceUnavailable, 15*time.Second)
		if !strings.Contains(body, "docker engine is unreachable") {
			t.Errorf("%s: /healthz 503 without the reason: %q", phase, body)
		}
		t.Logf("%s: /healthz 503 %q", phase, body)
		_, m := httpGet(t, base+"/metrics")
		if v := metricValue(t, m, `ddiskqos_source_up{source="docker"}`); v != "0" {
			t.Errorf("%s: source_up %s, want 0", phase, v)
		}
		errs := metricValue(t, m, `ddiskqos_source_errors_total{source="docker"}`)
		if errs == "0" {
			t.Errorf("%s: source_errors_total 0", phase)
		}
		t.Logf("%s: ddiskqos_source_errors_total{source=\"docker\"} %s", phase, errs)
		if _, err := r.snapshot(); err != nil {
			t.Errorf("%s: daemon not serving its snapshot: %v", phase, err)
		}
		// The operator's table names it too, under its first line (from
		// the next tick's snapshot on).
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			var out, errOut bytes.Buffer
			code := runStatus([]string{"--addr", r.addr}, &out, &errOut)
			lines := strings.SplitN(out.String(), "\n", 3)
			if code == 0 && len(lines) > 1 && strings.HasPrefix(lines[1], "DEGRADED: source docker: the docker engine is unreachable") {
				t.Logf("%s: status: %s", phase, lines[1])
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: status (exit %d, %s) does not say the source is down under its header:\n%s", phase, code, errOut.String(), out.String())
				break
			}
		}
	}
	healthy := func(phase string) {
		t.Helper()
		health(http.StatusOK, 30*time.Second)
		// The snapshot follows at the next tick.
		deadline := time.Now().Add(5 * time.Second)
		for {
			s, err := r.snapshot()
			if err == nil && s.SourceError == "" {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: snapshot still degraded (err %v): %+v", phase, err, s)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		_, m := httpGet(t, base+"/metrics")
		if v := metricValue(t, m, `ddiskqos_source_up{source="docker"}`); v != "1" {
			t.Errorf("%s: source_up %s, want 1", phase, v)
		}
		t.Logf("%s: /healthz 200", phase)
	}
	countWarn := func() int {
		return strings.Count(logs.String(), `level=WARN msg="docker engine unreachable`)
	}

	degraded("engine down at start")
	time.Sleep(2 * time.Second) // several attempts
	if n := countWarn(); n != 1 {
		t.Errorf("engine down at start: %d WARN lines after several attempts, want 1", n)
	}
	e.Start(t)
	healthy("engine started")
	waitLog(t, logs, 10*time.Second, "level=WARN", "docker engine reachable again")

	e.Stop(t)
	degraded("engine lost mid-run")
	time.Sleep(2 * time.Second)
	if n := countWarn(); n != 2 {
		t.Errorf("after the second outage: %d WARN lines, want 2", n)
	}
	line := waitLog(t, logs, time.Second, "level=WARN", "docker engine unreachable")
	t.Logf("log: %s", line)
	e.Start(t)
	healthy("engine back")
	stopWith(t, d, syscall.SIGTERM)
}

// TestRealRunAPIFlood: the real daemon under 300 clients that send half a
// request and hang, plus 500 concurrent requests: every request is
// answered or refused cleanly, the loop keeps ticking at its interval, and
// the hanging clients are cut off after the header timeout (5 s).
func TestRealRunAPIFlood(t *testing.T) {
	r := newRunRig(t)
	d, _ := r.startLogged(t, "--interval", "100ms", "--listen", r.addr)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := r.snapshot(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon API not up within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}
	before, err := r.snapshot()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()

	const hang = 300
	cut := make(chan time.Duration, hang)
	for range hang {
		go func() {
			c, err := net.Dial("tcp", r.addr)
			if err != nil {
				cut <- -1
				return
			}
			defer c.Close()
			began := time.Now()
			_, _ = c.Write([]byte("GET /v1/workloads HTTP/1.1\r\nHost: x\r\nX-Slow: "))
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
			_, err = c.Read(make([]byte, 1)) // returns when the server closes
			if err == nil {
				cut <- -2 // answered a half request?
				return
			}
			cut <- time.Since(began)
		}()
	}
	const n = 500
	cl := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[string]int{}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := []string{"/v1/workloads", "/metrics", "/healthz"}[i%3]
			resp, err := cl.Get("http://" + r.addr + path)
			key := ""
			if err != nil {
				key = "refused: " + err.Error()
			} else {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				key = path + " " + resp.Status
			}
			mu.Lock()
			codes[key]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	took := time.Since(start)
	after, err := r.snapshot()
	if err != nil {
		t.Fatalf("after the flood: %v", err)
	}
	ticks := after.Tick - before.Tick
	t.Logf("%d hanging clients + %d requests in %s: %v; loop ticked %d times (interval 100ms)", hang, n, took.Round(time.Millisecond), codes, ticks)
	for k, c := range codes {
		ok := strings.HasSuffix(k, " 200 OK") || k == "/metrics 503 Service Unavailable" // promhttp's in-flight cap
		if !ok {
			t.Errorf("%d requests: %s", c, k)
		}
	}
	if want := uint64(took / (300 * time.Millisecond)); ticks < want {
		t.Errorf("loop ticked %d times in %s of flood, want >= %d", ticks, took, want)
	}
	var longest time.Duration
	for range hang {
		select {
		case d := <-cut:
			if d < 0 {
				t.Fatalf("hanging client: %v", map[time.Duration]string{-1: "could not connect", -2: "got an answer to half a request"}[d])
			}
			longest = max(longest, d)
		case <-time.After(30 * time.Second):
			t.Fatal("hanging clients not cut off within 30s")
		}
	}
	t.Logf("hanging clients cut off after at most %s", longest.Round(time.Millisecond))
	if longest > 10*time.Second {
		t.Errorf("a hanging client was held %s, want about the 5s header timeout", longest)
	}
	stopWith(t, d, syscall.SIGTERM)
}
