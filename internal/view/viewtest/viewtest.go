// Package viewtest holds what the tests of the renderers (internal/view)
// and of the commands that print them (cmd/ddiskqos) share: a snapshot
// covering every column's cases, the hostile strings a name may carry,
// and a check that output is safe on a terminal.
package viewtest

import (
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// The fixtures name mechanisms as the registry spells them.
var (
	bfqWeight    = string(mech.BFQWeight)
	throttle     = string(mech.Throttle)
	levelLimit   = string(mech.LevelLimit)
	iocostWeight = string(mech.IOCostWeight)
)

// T0 is the fixture's tick time.
var T0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Fixture covers every column's cases: weights and limits, pinned,
// exempt, a per-level mechanism's value (level-limit), a label error, an
// apply error, PSI present and absent, the last
// level without allowance, a name that sorts differently from its rate.
func Fixture() *snapshot.Snapshot {
	bfq := func(w int) snapshot.Applied {
		return snapshot.Applied{Device: "loop3", Dev: "7:3", Mechanism: bfqWeight, Weight: w, Used: true}
	}
	return &snapshot.Snapshot{
		At: T0, Tick: 1234, Interval: time.Second, TickDuration: 3210 * time.Microsecond,
		Source: "docker", Actuator: "cgroup", CgroupMode: "v2",
		Workloads: []*snapshot.Workload{
			{
				ID: "0a1b2c3d4e5f67890a1b2c3d4e5f67890a1b2c3d4e5f67890a1b2c3d4e5f6789", Name: "backup",
				Level: 4, BytesInLevel: 3 << 30, Weight: 10,
				ReadBps: 180 << 20, WriteBps: 2 << 20,
				Applied:  []snapshot.Applied{bfq(10), {Device: "sda", Dev: "8:0", Mechanism: throttle, ReadBps: 10 << 20, WriteBps: 10 << 20, Throttled: true, Used: true}},
				Pressure: &snapshot.Pressure{SomeAvg10: 42.5, FullAvg10: 30.1},
				Latency: []snapshot.WorkloadLatency{{Device: "loop3", Dev: "7:3",
					Read: snapshot.OpLatency{Requests: 9000, InFlight: 31, TickRequests: 180, P50: 0.021, P99: 0.083}}},
			},
			{
				ID: "1111111111112222222222223333333333334444444444445555555555556666", Name: "db",
				Level: 1, Pinned: true, BytesInLevel: 1536 << 10, Allowance: 8 << 20, Weight: 1000, DTasks: 2,
				ReadBps: 300 << 10, WriteBps: 120 << 10,
				Applied: []snapshot.Applied{{Device: "loop3", Dev: "7:3", Mechanism: bfqWeight + "+" + levelLimit, Weight: 1000,
					Knobs: "level-limit=rbps=524288000 wbps=524288000 riops=max wiops=max", Used: true}},
				Pressure: &snapshot.Pressure{SomeAvg10: 0.25},
				Latency: []snapshot.WorkloadLatency{{Device: "loop3", Dev: "7:3",
					Read:  snapshot.OpLatency{Requests: 120, InFlight: 1, TickRequests: 75, P50: 0.0009, P99: 0.0042},
					Write: snapshot.OpLatency{Requests: 30, TickRequests: 30, P50: 0.0011, P99: 0.0023}}},
			},
			{
				ID: "2222222222223333333333334444444444445555555555556666666666667777", Name: "etl",
				Level: 3, BytesInLevel: 700 << 20, Allowance: 2 << 30, Weight: 100,
				ReadBps: 20 << 20, WriteBps: 40 << 20, LabelError: `ddiskqos.level "fast": want 1..4 or exempt`,
				Applied: []snapshot.Applied{{Device: "sda", Dev: "8:0", Mechanism: throttle, WriteBps: 20 << 20, Throttled: true, Error: "write io.max: device or resource busy", Used: true}},
			},
			{ID: "3333333333334444444444445555555555556666666666667777777777778888", Name: "ssh", Exempt: true},
			{
				ID: "4444444444445555555555556666666666667777777777778888888888889999", Name: "web-1",
				Level: 2, BytesInLevel: 900, Allowance: 64 << 20, Weight: 500, ReadBps: 512,
				Applied: []snapshot.Applied{
					{Device: "sda", Dev: "8:0", Mechanism: throttle, Used: true},
					{Device: "nvme0n1", Dev: "259:0", Mechanism: iocostWeight, Weight: 500},
					bfq(500),
					{Device: "loop4", Dev: "7:4", Mechanism: bfqWeight, Weight: 500},
				},
			},
		},
		Devices: []snapshot.Device{
			{Name: "sda", Dev: "8:0", Scheduler: "mq-deadline", Mechanism: throttle, TopActiveLevel: 3, ReadBps: 20 << 20, WriteBps: 40 << 20},
			{Name: "loop3", Dev: "7:3", Scheduler: "bfq", Mechanism: bfqWeight, WeightsEffective: true, TopActiveLevel: 1, ReadBps: 180 << 20, WriteBps: 2 << 20},
			{Name: "nvme0n1", Dev: "259:0", Scheduler: "none", Mechanism: iocostWeight, WeightsEffective: true},
		},
		Levels:       [5]int{1, 1, 1, 1, 1},
		Errors:       []snapshot.ErrorCount{{Cause: "sense", Count: 1}, {Cause: "actuate", Count: 3}},
		HostPressure: &snapshot.Pressure{SomeAvg10: 12.34, FullAvg10: 5.5},
		Health:       healthFixture(),
	}
}

// Capped is the case status once showed wrongly (a weight of 100 on a disk
// the container never touched, its cap only in --json): a container ("app") reading
// from its own disk (vda, throttle) at level 3, capped there at 64 MiB/s
// because a better level ("web") reads there too, with a weight of 100 on
// a disk it never touched (nvme0n1); a container ("idle") that did no I/O
// at all; vda's capacity measured.
func Capped() *snapshot.Snapshot {
	untouched := func(w int) snapshot.Applied {
		return snapshot.Applied{Device: "nvme0n1", Dev: "259:0", Mechanism: iocostWeight, Weight: w}
	}
	return &snapshot.Snapshot{
		At: T0, Tick: 77, Interval: time.Second, TickDuration: 900 * time.Microsecond,
		Source: "docker", Actuator: "cgroup", CgroupMode: "v1",
		Workloads: []*snapshot.Workload{
			{ID: "a1a1a1a1a1a1b2b2b2b2b2b2c3c3c3c3c3c3d4d4d4d4d4d4e5e5e5e5e5e5f6f6", Name: "app", Level: 3, Weight: 100,
				BytesInLevel: 900 << 20, Allowance: 2 << 30, ReadBps: 64 << 20,
				Applied: []snapshot.Applied{untouched(100),
					{Device: "vda", Dev: "254:0", Mechanism: throttle, ReadBps: 64 << 20, WriteBps: 64 << 20, Throttled: true, Used: true}}},
			{ID: "0f0f0f0f0f0f1e1e1e1e1e1e2d2d2d2d2d2d3c3c3c3c3c3c4b4b4b4b4b4b5a5a", Name: "idle", Level: 1, Weight: 1000,
				Allowance: 8 << 20,
				Applied:   []snapshot.Applied{untouched(1000), {Device: "vda", Dev: "254:0", Mechanism: throttle}}},
			{ID: "9e9e9e9e9e9e8d8d8d8d8d8d7c7c7c7c7c7c6b6b6b6b6b6b5a5a5a5a5a5a4949", Name: "web", Level: 1, Weight: 1000,
				BytesInLevel: 3 << 20, Allowance: 8 << 20, ReadBps: 400 << 10,
				Applied: []snapshot.Applied{untouched(1000), {Device: "vda", Dev: "254:0", Mechanism: throttle, Used: true}}},
		},
		Devices: []snapshot.Device{
			{Name: "nvme0n1", Dev: "259:0", Scheduler: "none", Mechanism: iocostWeight, WeightsEffective: true},
			{Name: "vda", Dev: "254:0", Scheduler: "mq-deadline", Mechanism: throttle, TopActiveLevel: 1,
				ReadBps: 64<<20 + 400<<10, CapacityBps: 180 << 20, CapacityIOPS: 2400},
		},
		Levels: [5]int{0, 2, 0, 1, 0},
	}
}

// healthFixture: sda exhausted, nvme0n1 draining with a model and its
// levels 2-4 held to its baseline, 4 blocked tasks, a probe with one write
// hanging.
func healthFixture() *snapshot.Health {
	tte, blocked := 754.0, uint64(4)
	return &snapshot.Health{BlockedTasks: &blocked,
		Devices: []snapshot.DeviceHealth{
			{Name: "nvme0n1", State: "draining", Since: T0.Add(-time.Minute),
				Model: &snapshot.BurstModel{Name: "aws-gp2", Balance: 0.42, SecondsToEmpty: &tte},
				Hold: &snapshot.BurstHold{Held: true, Since: T0.Add(-20 * time.Second), Reason: "burst balance 49% below 50%",
					Below: 0.5, Release: 0.6, FromLevel: 2, CapIOPS: 300}},
			{Name: "sda", State: "exhausted", Since: T0.Add(-30 * time.Second),
				Reason: "throttled by the device (burst credit exhausted?): a steady 300 IOPS"},
		},
		Probe: &snapshot.SyncProbe{Path: "/var/tmp/ddiskqos-probe", Count: 10, Sum: 0.05, Last: 0.004, Pending: 12}}
}

// After is snap one tick later, with edit applied to a deep enough copy
// (the workloads are new values, the published ones stay untouched).
func After(snap *snapshot.Snapshot, edit func(s *snapshot.Snapshot)) *snapshot.Snapshot {
	next := *snap
	next.Tick++
	next.At = snap.At.Add(snap.Interval)
	next.Workloads = make([]*snapshot.Workload, len(snap.Workloads))
	for i, w := range snap.Workloads {
		c := *w
		next.Workloads[i] = &c
	}
	if edit != nil {
		edit(&next)
	}
	return &next
}

// Find is the workload of s called name; it panics when there is none.
func Find(s *snapshot.Snapshot, name string) *snapshot.Workload {
	for _, w := range s.Workloads {
		if w.Name == name {
			return w
		}
	}
	panic("no workload " + name)
}

// Hostile are strings a workload's name (or anything else the daemon
// reports) may carry, each with what a table must show instead.
var Hostile = []struct{ In, Want string }{
	{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},         // OSC: set the window title
	{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},               // CSI: clear the screen
	{"a\tb\nc\rd", `a\tb\nc\rd`},                     // table breakers
	{"del\x7f", `del\x7f`},                           // DEL
	{"c1\u009b31m", `c1\u009b31m`},                   // C1 CSI (8-bit)
	{"c1\u0085nel", `c1\u0085nel`},                   // C1 NEL
	{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},           // not UTF-8
	{"rlo\u202eexe.txt", `rlo\u202eexe.txt`},         // bidi override
	{"nul\x00", `nul\x00`},                           //
	{"ls\u2028x", `ls\u2028x`},                       // line separator
	{"plain name_1.2-3", "plain name_1.2-3"},         // unchanged
	{"数据库 café", "数据库 café"},                         // printable non-ASCII stays
	{`system-getty\x2dtty1`, `system-getty\x2dtty1`}, // systemd's own escapes stay
}

// HostileFixture is Fixture with a workload per Hostile string (in its
// name, ID, label error, device, mechanism and apply error) and hostile
// daemon-wide strings; it returns the snapshot and what its text must
// show, escaped.
func HostileFixture() (*snapshot.Snapshot, []string) {
	snap := Fixture()
	var wants []string
	for i, h := range Hostile {
		wants = append(wants, h.Want+"-w")
		w := &snapshot.Workload{ID: h.In + "0123456789abcdef", Name: h.In + "-w", Level: 1 + i%4, Weight: 100,
			LabelError: "label " + h.In,
			Applied: []snapshot.Applied{{Device: "dev" + h.In, Dev: "7:" + h.In, Mechanism: "mech" + h.In,
				Error: "err " + h.In, Used: true}}}
		snap.Workloads = append(snap.Workloads, w)
	}
	snap.Levels = [5]int{}
	for _, w := range snap.Workloads {
		snap.Levels[w.Level]++
	}
	evil := "\x1b]0;pwned\x07\u009b\xff"
	snap.Source, snap.Actuator, snap.CgroupMode = "docker"+evil, "cgroup"+evil, "v2"+evil
	snap.Errors = append(snap.Errors, snapshot.ErrorCount{Cause: "cause" + evil, Count: 1})
	snap.Devices = append(snap.Devices, snapshot.Device{Name: "disk" + evil, Dev: "8:" + evil, Scheduler: "bfq" + evil,
		Mechanism: bfqWeight + evil})
	wants = append(wants, `docker\x1b]0;pwned\x07\u009b\xff`, `cause\x1b]0;pwned\x07\u009b\xff 1`,
		`disk\x1b]0;pwned\x07`, `8:\x1b]0;pwned`, `bfq\x1b]0;pwned`, `label \x1b]0;pwned\x07`,
		`err \x1b]0;pwned\x07`, `dev\x1b]0;pwned\x07:mech\x1b]0;pwned\x07`, `\x1b]0;pwned\x0701 `)
	return snap, wants
}

// AssertTerminalSafe fails when out holds anything a terminal would act
// on: a control character other than newline, a C1 control, DEL, a bidi
// or other format character, or bytes that are not UTF-8.
func AssertTerminalSafe(t testing.TB, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: not valid UTF-8", what)
	}
	for i, r := range out {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			t.Errorf("%s: raw %U at byte %d: ...%q...", what, r, i, out[max(0, i-20):min(len(out), i+20)])
		}
	}
}
