package policy

import (
	"errors"
	"testing"
	"time"
)

func recentConfig() Config {
	c := DefaultConfig()
	c.Mode = ModeRecent
	return c
}

// TestRecentServiceStaysAboveStreamer: the failure of the paper's rule on a
// real host (issue 20): a web service reading 400 KB/s beside a 1 GB/s
// streamer, both for 10 minutes. Under ModeRecent the service settles at
// level 2 and stays there; the streamer is at level 4 within a second and
// never leaves it (no boost: it never sits at level 1 uncapped). Under
// ModePaper the same service reaches level 4 (the bug this mode fixes).
func TestRecentServiceStaysAboveStreamer(t *testing.T) {
	t.Parallel()
	const tick = 100 * time.Millisecond
	run := func(c Config) (svcWorst, svcEnd, strBest Level) {
		e, err := New(c)
		if err != nil {
			t.Fatal(err)
		}
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		svcWorst, strBest = Level1, Level4
		for i := range int(10 * time.Minute / tick) {
			now := t0.Add(time.Duration(i) * tick)
			s := e.Observe(now, "web", 40_000, nil)        // 400 KB/s
			st := e.Observe(now, "bulk", 100_000_000, nil) // 1 GB/s
			svcWorst, svcEnd = max(svcWorst, s.Level), s.Level
			if now.Sub(t0) >= time.Second {
				strBest = min(strBest, st.Level)
			}
		}
		return
	}
	worst, end, best := run(recentConfig())
	if worst > Level2 || end != Level2 || best != Level4 {
		t.Errorf("recent: service worst level %v, last %v (want 2 at most, 2 at the end); streamer best after 1 s %v (want 4)", worst, end, best)
	}
	if worst, _, best := run(DefaultConfig()); worst != Level4 || best != Level1 {
		t.Errorf("paper: service worst level %v (want 4: cumulative bytes), streamer best %v (want 1: the boost)", worst, best)
	}
}

// TestRecentLevelsByRate: the steady level of a workload is set by its rate
// (usage = rate × Window at steady state): with the defaults, thresholds
// at 2, 10 and 42 MiB of usage, i.e. ~210 KB/s, ~1.05 MB/s, ~4.4 MB/s.
func TestRecentLevelsByRate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		bps  uint64
		want Level
	}{
		{5 * 4096, Level1},   // health checks: 5 reads of 4 KiB a second
		{150_000, Level1},    // below 2 MiB / 10 s
		{400_000, Level2},    // the web service of issue 20
		{2_000_000, Level3},  // 2 MB/s
		{10_000_000, Level4}, // 10 MB/s
	} {
		e, _ := New(recentConfig())
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var d Decision
		for i := range 1200 { // 2 minutes of 100 ms ticks
			d = e.Observe(t0.Add(time.Duration(i)*100*time.Millisecond), "w", tc.bps/10, nil)
		}
		if d.Level != tc.want {
			t.Errorf("%d B/s: level %v after 2 min, want %v", tc.bps, d.Level, tc.want)
		}
	}
}

// TestRecentBurstMatchesPaper: a new workload's burst goes down through the
// same bytes as under the paper's rule (no time passes to decay it): 300 MiB
// in one observation is three drops, to level 4.
func TestRecentBurstMatchesPaper(t *testing.T) {
	t.Parallel()
	e, _ := New(recentConfig())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.Observe(now, "w", 0, nil)
	d := e.Observe(now, "w", 300*MiB, nil)
	tr := d.Transitions()
	if d.Level != Level4 || len(tr) != 3 {
		t.Fatalf("300 MiB at once: level %v, %d transitions %+v; want 4 and 3", d.Level, len(tr), tr)
	}
	for i, want := range []uint64{2 * MiB, 8 * MiB, 32 * MiB} {
		if tr[i].Reason != ReasonAllowanceUsed || tr[i].BytesInLevel != want || tr[i].To != Level(i+2) {
			t.Errorf("transition %d: %+v, want allowance-used to %d after %d bytes", i, tr[i], i+2, want)
		}
	}
	// 1.9 MiB is level 1, 2 MiB level 2, as in the paper ("used up" is reached).
	e.Observe(now, "x", 2*MiB-1, nil)
	if v, _ := e.Get("x"); v.Level != Level1 {
		t.Errorf("2 MiB - 1: level %v, want 1", v.Level)
	}
	if d := e.Observe(now, "x", 1, nil); d.Level != Level2 {
		t.Errorf("2 MiB: level %v, want 2", d.Level)
	}
}

// TestRecentStopRisesOneLevelAtATime: a streamer that stops rises one
// level at a time as its usage decays (reason usage-decayed), with
// hysteresis (up only below half of the threshold crossed), and is back at
// level 1 within a minute.
func TestRecentStopRisesOneLevelAtATime(t *testing.T) {
	t.Parallel()
	e, _ := New(recentConfig())
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 50 {
		e.Observe(t0.Add(time.Duration(i)*100*time.Millisecond), "w", 100_000_000, nil)
	}
	if v, _ := e.Get("w"); v.Level != Level4 || v.Usage != uint64(170*MiB) {
		t.Fatalf("after 5 s at 1 GB/s: level %v, usage %d; want 4 and the cap, 170 MiB", v.Level, v.Usage)
	}
	var ups []Transition
	at1 := time.Duration(-1)
	for i := range 900 { // 90 s idle
		now := t0.Add(5*time.Second + time.Duration(i)*100*time.Millisecond)
		d := e.Observe(now, "w", 0, nil)
		ups = append(ups, d.Transitions()...)
		if d.Level == Level1 && at1 < 0 {
			at1 = now.Sub(t0) - 5*time.Second
		}
	}
	if len(ups) != 3 {
		t.Fatalf("idle after streaming: %d transitions %+v, want 3 (4→3→2→1)", len(ups), ups)
	}
	for i, tr := range ups {
		if tr.Reason != ReasonUsageDecayed || tr.From != Level(4-i) || tr.To != Level(3-i) {
			t.Errorf("transition %d: %+v, want usage-decayed %d→%d", i, tr, 4-i, 3-i)
		}
	}
	if at1 < 0 || at1 > time.Minute {
		t.Errorf("back at level 1 after %v idle, want within 1 min", at1)
	}
	// Hysteresis: a burst of 3 MiB puts a workload at level 2; a steady
	// 150 KiB/s after it settles at a usage of 1.5 MiB, below the level-2
	// threshold (2 MiB) but above half of it: it stays at level 2, with
	// no flapping.
	e2, _ := New(recentConfig())
	d := e2.Observe(t0, "h", 3*MiB, nil)
	n := len(d.Transitions())
	for i := 1; i < 3000; i++ {
		d := e2.Observe(t0.Add(time.Duration(i)*100*time.Millisecond), "h", 15*1024, nil) // 150 KiB/s
		n += len(d.Transitions())
	}
	if v, _ := e2.Get("h"); v.Level != Level2 || n != 2 || v.Usage < 1400*1024 || v.Usage > 1600*1024 {
		t.Errorf("3 MiB, then 150 KiB/s for 5 min: level %v with %d transitions, usage %d; want 2 with 2 (new, allowance-used), ~1.5 MiB",
			v.Level, n, v.Usage)
	}
}

// TestRecentConfigValidation: the recent rule needs a Window; a Mode out
// of range is refused.
func TestRecentConfigValidation(t *testing.T) {
	t.Parallel()
	c := recentConfig()
	c.Window = 0
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "Window" {
		t.Errorf("recent with Window 0: %v, want a Window FieldError", err)
	}
	c = DefaultConfig()
	c.Mode = 7
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "Mode" {
		t.Errorf("mode 7: %v, want a Mode FieldError", err)
	}
	for s, want := range map[string]Mode{"paper": ModePaper, "recent": ModeRecent} {
		if m, err := ParseMode(s); err != nil || m != want || m.String() != s {
			t.Errorf("ParseMode(%q) = %v, %v", s, m, err)
		}
	}
	if _, err := ParseMode("fifo"); err == nil {
		t.Error(`ParseMode("fifo") accepted`)
	}
}

// TestRecentReconfigureAndRestore: switching a running engine from the
// paper's rule to the recent one keeps every level (the level's bytes
// become its usage); a restored view keeps its usage.
func TestRecentReconfigureAndRestore(t *testing.T) {
	t.Parallel()
	e, _ := New(DefaultConfig())
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e.Observe(now, "a", 20*MiB, nil) // level 3, 10 MiB in it
	if err := e.Reconfigure(recentConfig()); err != nil {
		t.Fatal(err)
	}
	if d := e.Observe(now, "a", 0, nil); d.Level != Level3 || len(d.Transitions()) != 0 {
		t.Fatalf("after paper → recent: level %v, transitions %+v; want 3, none", d.Level, d.Transitions())
	}
	v, _ := e.Get("a")
	if v.Usage != 20*MiB {
		t.Errorf("usage after the switch %d, want 20 MiB", v.Usage)
	}
	e2, _ := New(recentConfig())
	if err := e2.Restore(v); err != nil {
		t.Fatal(err)
	}
	if d := e2.Observe(now, "a", 0, nil); d.Level != Level3 || len(d.Transitions()) != 0 {
		t.Errorf("restored: level %v, transitions %+v; want 3, none", d.Level, d.Transitions())
	}
}
