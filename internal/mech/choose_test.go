package mech

import (
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// facts is a device's host facts as internal/host hands them over: v1 or
// v2 mounted at /sys/fs/cgroup[/blkio], every mechanism's files offered
// (known), iocost built on v2 but off, scheduler sched of "none
// mq-deadline bfq" (of "noop deadline cfq" for cfq: kernels before 5.0).
func facts(v int, name, sched string) Env {
	h := cgroupfs.Hierarchy{Version: v, Mount: "/sys/fs/cgroup"}
	if v == 1 {
		h.Mount += "/blkio"
	}
	seen := func(f string) Offer { return Offer{File: f, Present: true, Known: true, How: "seen: " + f} }
	e := Env{H: h, Enabled: v != 0, Dev: cgroupfs.Dev{Major: 8}, Name: name, Kind: "scsi",
		Scheduler: sched, Schedulers: []string{"none", "mq-deadline", "bfq"},
		Offered: map[Name]Offer{BFQWeight: seen("blkio.bfq.weight"), CFQWeight: seen("blkio.weight"), Throttle: seen("blkio.throttle.read_bps_device")}}
	if sched == "cfq" {
		e.Schedulers = []string{"noop", "deadline", "cfq"}
	}
	if v == 2 {
		e.Offered = map[Name]Offer{BFQWeight: seen("io.bfq.weight"), CFQWeight: seen("io.weight"), Throttle: seen("io.max"), IOCostWeight: seen("io.cost.qos")}
	}
	return e
}

// withIOCost is e with iocost enabled for the device.
func withIOCost(e Env) Env {
	e.IOCostOn = true
	return e
}

func absent(e Env, n Name) Env {
	o := e.Offered[n]
	o.Present, o.How = false, "absent: "+o.File
	e.Offered[n] = o
	return e
}

// TestChoose: each mechanism is chosen where it should be, and each
// refusal reads as check shows it (the reason whole, and the fix).
func TestChoose(t *testing.T) {
	t.Parallel()
	iocostOn := withIOCost(facts(2, "sda", "bfq"))
	bfqUnknown := facts(2, "sda", "bfq")
	bfqUnknown.Offered[BFQWeight] = Offer{File: "io.bfq.weight", How: "not verified: no child cgroup"}
	legacy := facts(1, "sda", "deadline")
	legacy.Schedulers = []string{"noop", "deadline", "cfq"}
	dm := facts(1, "dm-0", "")
	dm.Kind, dm.Slaves = "dm", []string{"vda"}
	dm2 := facts(2, "dm-0", "")
	dm2.Kind, dm2.Slaves = "dm", []string{"vda"}
	noBFQ := facts(1, "vda", "mq-deadline")
	noBFQ.Schedulers = []string{"none", "mq-deadline"}
	noV2IOCost := facts(2, "sda", "none")
	delete(noV2IOCost.Offered, IOCostWeight)
	disabled := facts(2, "sda", "bfq")
	disabled.Enabled = false
	for _, c := range []struct {
		name string
		e    Env
		mech Name
		file string // the device weight file; "" without weights
		rng  WeightRange
		why  string
		fix  string
		how  string
	}{
		{"iocost on: preferred over bfq", iocostOn, IOCostWeight, "io.weight", WeightRange{1, 10000, 100},
			"iocost is enabled for 8:0 (io.cost.qos enable=1): io.weight is honoured under any scheduler (active: bfq); preferred over bfq: work-conserving, cheap per request, models the device's cost", "", "seen: io.cost.qos"},
		{"v1 bfq", facts(1, "sda", "bfq"), BFQWeight, "blkio.bfq.weight_device", WeightRange{1, 1000, 100},
			"scheduler is bfq: blkio.bfq.weight_device sets each cgroup's share of sda", "", "seen: blkio.bfq.weight"},
		{"v2 bfq, iocost off", facts(2, "sda", "bfq"), BFQWeight, "io.bfq.weight", WeightRange{1, 1000, 100},
			"scheduler is bfq: io.bfq.weight sets each cgroup's share of sda", "", "seen: io.bfq.weight"},
		{"v2 bfq not verified", bfqUnknown, BFQWeight, "io.bfq.weight", WeightRange{1, 1000, 100},
			"scheduler is bfq: io.bfq.weight sets each cgroup's share of sda (not verified: no child cgroup)", "", "not verified: no child cgroup"},
		{"v1 cfq", facts(1, "sda", "cfq"), CFQWeight, "blkio.weight_device", WeightRange{10, 1000, 500},
			"scheduler is cfq: blkio.weight_device sets each cgroup's share of sda", "", "seen: blkio.weight"},
		{"v1 bfq without group scheduling", absent(facts(1, "sda", "bfq"), BFQWeight), Throttle, "", WeightRange{},
			"scheduler is bfq but blkio.bfq.weight is not offered (absent: blkio.bfq.weight; kernel built without CONFIG_BFQ_GROUP_IOSCHED?); only blkio.throttle.* limits work", "", "seen: blkio.throttle.read_bps_device"},
		{"v2 bfq without group scheduling: enable iocost", absent(facts(2, "sda", "bfq"), BFQWeight), Throttle, "", WeightRange{},
			"scheduler is bfq but io.bfq.weight is not offered (absent: io.bfq.weight; kernel built without CONFIG_BFQ_GROUP_IOSCHED?); only io.max limits work; to get weights, enable iocost: echo '8:0 enable=1' > /sys/fs/cgroup/io.cost.qos",
			"echo '8:0 enable=1' > /sys/fs/cgroup/io.cost.qos", "seen: io.max"},
		{"v1 cfq without group scheduling", absent(facts(1, "sda", "cfq"), CFQWeight), Throttle, "", WeightRange{},
			"scheduler is cfq but blkio.weight is not offered (absent: blkio.weight; kernel built without CONFIG_CFQ_GROUP_IOSCHED?); only blkio.throttle.* limits work", "", "seen: blkio.throttle.read_bps_device"},
		{"v1 none: switch to bfq", facts(1, "loop0", "none"), Throttle, "", WeightRange{},
			"scheduler is none: weights are ignored; only blkio.throttle.* limits work; to get weights: echo bfq > /sys/block/loop0/queue/scheduler (iocost would need cgroup v2 as the I/O hierarchy)",
			"echo bfq > /sys/block/loop0/queue/scheduler", "seen: blkio.throttle.read_bps_device"},
		{"v2 none: switch to bfq, or enable iocost", facts(2, "sda", "none"), Throttle, "", WeightRange{},
			"scheduler is none: weights are ignored; only io.max limits work; to get weights: echo bfq > /sys/block/sda/queue/scheduler, or enable iocost: echo '8:0 enable=1' > /sys/fs/cgroup/io.cost.qos",
			"echo bfq > /sys/block/sda/queue/scheduler", "seen: io.max"},
		{"v2 none, kernel without iocost", noV2IOCost, Throttle, "", WeightRange{},
			"scheduler is none: weights are ignored; only io.max limits work; to get weights: echo bfq > /sys/block/sda/queue/scheduler",
			"echo bfq > /sys/block/sda/queue/scheduler", "seen: io.max"},
		{"bfq not loaded", noBFQ, Throttle, "", WeightRange{},
			"scheduler is mq-deadline: weights are ignored; only blkio.throttle.* limits work; to get weights: modprobe bfq && echo bfq > /sys/block/vda/queue/scheduler (iocost would need cgroup v2 as the I/O hierarchy)",
			"modprobe bfq && echo bfq > /sys/block/vda/queue/scheduler", "seen: blkio.throttle.read_bps_device"},
		{"legacy block layer: switch to cfq, not bfq", legacy, Throttle, "", WeightRange{},
			"scheduler is deadline: weights are ignored; only blkio.throttle.* limits work; to get weights: echo cfq > /sys/block/sda/queue/scheduler (iocost would need cgroup v2 as the I/O hierarchy)",
			"echo cfq > /sys/block/sda/queue/scheduler", "seen: blkio.throttle.read_bps_device"},
		{"v1 stacked", dm, Throttle, "", WeightRange{},
			"dm-0 is a stacked dm device with no scheduler of its own: weights work on the disks under it (vda), not here; only blkio.throttle.* limits work", "", "seen: blkio.throttle.read_bps_device"},
		{"v2 stacked: enable iocost", dm2, Throttle, "", WeightRange{},
			"dm-0 is a stacked dm device with no scheduler of its own: weights work on the disks under it (vda), not here; only io.max limits work; to get weights, enable iocost: echo '8:0 enable=1' > /sys/fs/cgroup/io.cost.qos",
			"echo '8:0 enable=1' > /sys/fs/cgroup/io.cost.qos", "seen: io.max"},
		{"v1 bio-based", facts(1, "zram0", ""), Throttle, "", WeightRange{},
			"zram0 has no I/O scheduler (bio-based): weights are ignored; only blkio.throttle.* limits work", "", "seen: blkio.throttle.read_bps_device"},
		{"nothing: no throttle either", absent(facts(1, "sda", "none"), Throttle), None, "", WeightRange{},
			"scheduler is none: weights are ignored, and blkio.throttle.read_bps_device is not offered (absent: blkio.throttle.read_bps_device); to get weights: echo bfq > /sys/block/sda/queue/scheduler (iocost would need cgroup v2 as the I/O hierarchy)",
			"echo bfq > /sys/block/sda/queue/scheduler", "absent: blkio.throttle.read_bps_device"},
		{"no I/O hierarchy", facts(0, "sda", "bfq"), None, "", WeightRange{},
			"no I/O cgroup hierarchy: neither v1 blkio nor cgroup2 is mounted", "mount -t cgroup -o blkio blkio /sys/fs/cgroup/blkio", ""},
		{"v2 without the io controller", disabled, None, "", WeightRange{},
			"the cgroup v2 hierarchy at /sys/fs/cgroup has no io controller (it is bound to a v1 hierarchy or not built): no cgroup can shape I/O on sda",
			"mount the blkio controller (cgroup v1) or boot with systemd.unified_cgroup_hierarchy=1 so io is on cgroup v2", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Choose(c.e, Params{})
			if got.Mechanism != c.mech || got.WeightDeviceFile != c.file || got.WeightsEffective != (c.file != "") {
				t.Errorf("chose %s (file %q, weights %v), want %s (file %q)", got.Mechanism, got.WeightDeviceFile, got.WeightsEffective, c.mech, c.file)
			}
			if (got.Weight != nil) != (c.file != "") || (got.Weight != nil && *got.Weight != c.rng) {
				t.Errorf("weight range %v, want %v", got.Weight, c.rng)
			}
			if got.Reason != c.why {
				t.Errorf("reason\n%s\nwant\n%s", got.Reason, c.why)
			}
			if got.Fix != c.fix || got.Verified != c.how {
				t.Errorf("fix %q verified %q, want %q %q", got.Fix, got.Verified, c.fix, c.how)
			}
		})
	}
}

// TestChooseWalksTheTable: every weight and the caps probe devices, in the
// table's order, which puts iocost ahead of bfq and the caps after every
// weight.
func TestChooseWalksTheTable(t *testing.T) {
	t.Parallel()
	var order []Name
	for _, m := range All() {
		if (m.Role == Weight || m.Role == Caps) && m.Probe != nil {
			order = append(order, m.Name)
			if m.Role == Weight && (m.WeightFiles == nil || m.Range.Max == 0) {
				t.Errorf("%s: a weight that probes devices needs WeightFiles and Range", m.Name)
			}
		}
	}
	want := []Name{IOCostWeight, BFQWeight, CFQWeight, Throttle}
	if len(order) != len(want) {
		t.Fatalf("probing order %v, want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("probing order %v, want %v", order, want)
		}
	}
}

// TestProbeIOCost: each reason iocost gives for not working, and its fix
// only where the kernel has it.
func TestProbeIOCost(t *testing.T) {
	t.Parallel()
	noIOCost := facts(2, "sda", "none")
	noIOCost.Offered[IOCostWeight] = Offer{File: "io.cost.qos", Known: true, How: "absent: io.cost.qos"}
	for _, c := range []struct {
		e        Env
		why, fix string
	}{
		{facts(1, "sda", "none"), "iocost needs cgroup v2 as the I/O hierarchy", ""},
		{noIOCost, "the kernel has no iocost (absent: io.cost.qos)", ""},
		{facts(2, "sda", "none"), "iocost is not enabled for 8:0 (io.cost.qos)", "echo '8:0 enable=1' > /sys/fs/cgroup/io.cost.qos"},
	} {
		v := probeIOCost(c.e)
		if v.OK || v.Reason != c.why || v.Fix != c.fix || v.Rank != RankOff {
			t.Errorf("v%d: %+v, want refusal %q fix %q", c.e.H.Version, v, c.why, c.fix)
		}
	}
}

// TestChooseBeside: what runs beside a device's main mechanism is the
// configuration's and the probes' — the throttle beside a scheduler's
// weight, level-limit where the throttle does not run — and a mechanism
// turned on that cannot run says why.
func TestChooseBeside(t *testing.T) {
	t.Parallel()
	limits := []uint64{0, 0, 0, 1 << 20}
	for _, c := range []struct {
		name string
		e    Env
		p    Params
		also []Name
		not  Name
	}{
		{"bfq: throttle beside", facts(1, "sda", "bfq"), Params{ThrottleWithWeights: true}, []Name{Throttle}, ""},
		{"bfq: throttle off", facts(1, "sda", "bfq"), Params{}, nil, ""},
		{"cfq: throttle beside", facts(1, "sda", "cfq"), Params{ThrottleWithWeights: true}, []Name{Throttle}, ""},
		{"iocost: no throttle beside", withIOCost(facts(2, "sda", "bfq")), Params{ThrottleWithWeights: true}, nil, ""},
		{"bfq: level-limit", facts(2, "sda", "bfq"), Params{LevelLimits: limits}, []Name{LevelLimit}, ""},
		{"bfq: the throttle owns the limits", facts(2, "sda", "bfq"), Params{ThrottleWithWeights: true, LevelLimits: limits}, []Name{Throttle}, LevelLimit},
		{"throttle: the throttle owns the limits", facts(1, "sda", "none"), Params{ThrottleWithWeights: true, LevelLimits: limits}, nil, LevelLimit},
		{"none: nothing beside", absent(facts(1, "sda", "none"), Throttle), Params{ThrottleWithWeights: true, LevelLimits: limits}, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := Choose(c.e, c.p)
			if Join(got.Also) != Join(c.also) {
				t.Errorf("also %v, want %v", got.Also, c.also)
			}
			switch {
			case c.not == "" && len(got.NotBeside) > 0:
				t.Errorf("not beside %+v, want none", got.NotBeside)
			case c.not != "" && (len(got.NotBeside) != 1 || got.NotBeside[0].Mechanism != c.not || got.NotBeside[0].Reason == ""):
				t.Errorf("not beside %+v, want %s with why", got.NotBeside, c.not)
			}
		})
	}
}
