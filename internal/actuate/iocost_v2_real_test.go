package actuate

// Reaction to a better level's first request under iocost weights, inside
// the test VM (make test-v2): they act in the kernel, with no loop at all.
// The test logs its figures (median, spread, runs); the bounds asserted are
// generous, as the VM is emulated and the host shared.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/testkit"
	"github.com/ddiskqos/ddiskqos/internal/testkit/realcg"
)

// TestRealV2IOCostFirstRequest: with iocost on the VM's disk, weights act
// in the kernel on the first request; there is no loop to react. It
// measures a victim's first 4 KiB read, each from a brand-new cgroup,
// beside a stream at iodepth 32, interleaved over configurations: iocost
// off; then, with iocost's model at half the disk's 100 MiB/s cap and at
// the cap: no weights (all at io.weight's default 100); the daemon's level
// weights with the victim known at level 1 (100) and the stream at level
// 4 (10); the same with the victim new, before the daemon's first tick
// (io.weight's default 100, level 1's weight, against the stream's 10). It asserts the
// weights read back and that, with the model at half the cap, a known
// level-1 victim's median is below iocost off's.
func TestRealV2IOCostFirstRequest(t *testing.T) {
	r := realcg.V2(t, realcg.Options{Scheduler: "none"})
	_, err := os.Stat(filepath.Join(r.H.Mount, "io.cost.qos"))
	testkit.Need(t, err == nil, "iocost not built into this kernel: %v", err)
	model := func(bps int) {
		iops := bps / 4096
		if err := r.H.WriteCostModel(fmt.Sprintf("%s ctrl=user model=linear rbps=%d rseqiops=%d rrandiops=%d wbps=%d wseqiops=%d wrandiops=%d",
			r.Dev, bps, iops, iops, bps, iops, iops)); err != nil {
			t.Fatal(err)
		}
	}
	iocost := func(on bool) {
		v := r.Dev.String() + " enable=0"
		if on {
			v = r.Dev.String() + " enable=1 ctrl=user rpct=0 rlat=0 wpct=0 wlat=0 min=100 max=100"
		}
		if err := r.H.WriteCostQoS(v); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		iocost(false)
		r.H.WriteCostModel(r.Dev.String() + " ctrl=auto")
	})
	im, err := mech.Lookup(mech.IOCostWeight)
	if err != nil {
		t.Fatal(err)
	}
	k, err := im.Open(r.H, r.Dev, mech.Params{})
	if err != nil {
		t.Fatal(err)
	}
	m := k.(mech.Leveled)
	levels := policy.DefaultConfig().Weights
	setLevel := func(cg string, level int) {
		s := ""
		if level > 0 {
			s = m.Want(level, cgroupfs.Weight(levels[level-1]))
		}
		if err := m.Write(cg, s); err != nil {
			t.Fatal(err)
		}
		if err := mech.Verify(m, im.Knob, cg, s); err != nil {
			t.Fatal(err)
		}
	}
	lo := r.Child(t, "lo")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const half, full = 50 << 20, 100 << 20
	model(half)
	iocost(true)
	r.Stream(t, ctx, lo, 32)

	type config struct {
		name       string
		model      int // iocost's model in bytes/s; 0: iocost off
		lo, victim int // levels (0: no weight written)
		latency    []time.Duration
	}
	cfgs := []*config{{name: "iocost off"}}
	for _, bps := range []int{half, full} {
		mm := fmt.Sprintf("model %d MiB/s", bps>>20)
		cfgs = append(cfgs,
			&config{name: mm + ", no weights", model: bps},
			&config{name: mm + ", victim known (L1 100 vs L4 10)", model: bps, lo: 4, victim: 1},
			&config{name: mm + ", victim new (default 100 = L1 vs L4 10)", model: bps, lo: 4})
	}
	const rounds = 10
	for i := range rounds {
		for j, c := range cfgs {
			if c.model != 0 {
				model(c.model)
			}
			iocost(c.model != 0)
			setLevel(lo, c.lo)
			v := r.Child(t, fmt.Sprintf("v%d-%d", i, j))
			if c.victim > 0 {
				setLevel(v, c.victim)
			}
			time.Sleep(300 * time.Millisecond) // the stream settles under the configuration
			res := r.Victim(t, v)
			c.latency = append(c.latency, time.Duration(res.Latency.Max*float64(time.Microsecond)))
			p, _ := r.H.Path(v)
			testkit.RemoveCgroup(t, p)
		}
	}
	for _, c := range cfgs {
		t.Logf("%-48s victim's first 4 KiB read: %s", c.name, testkit.Spread(c.latency))
	}
	for _, c := range cfgs[1:] {
		if c.victim == 1 && c.model == half && testkit.Median(c.latency) >= testkit.Median(cfgs[0].latency) {
			t.Errorf("%s: a level-1 victim's first read, median %s, not below iocost off's %s", c.name, testkit.Median(c.latency), testkit.Median(cfgs[0].latency))
		}
	}
}
