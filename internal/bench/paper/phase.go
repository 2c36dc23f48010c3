package paper

// One phase: a configuration of one trial, its containers and what they read.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/containers"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/policy"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// setup is a configuration's scheduler, daemon and weights.
type setup struct {
	sched  string // "" = the device's default
	daemon *policy.Config
	static bool
	bulk   bool
	small  bool
}

func setupOf(c string) setup {
	switch c {
	case CfgIdle:
		return setup{small: true}
	case CfgSolo:
		return setup{bulk: true}
	case CfgOriginal:
		return setup{bulk: true, small: true}
	case CfgBFQ:
		return setup{sched: "bfq", bulk: true, small: true}
	case CfgStatic:
		return setup{sched: "bfq", static: true, bulk: true, small: true}
	case CfgDdiskqos:
		pc := policy.DefaultConfig()
		return setup{daemon: &pc, bulk: true, small: true}
	case CfgPaper:
		pc := PaperPolicy()
		return setup{sched: "bfq", daemon: &pc, bulk: true, small: true}
	}
	return setup{}
}

// phase runs one configuration of one trial.
func (b *bench) phase(trial int, cfg string) (err error) {
	s := setupOf(cfg)
	ph := Phase{Trial: trial, Config: cfg}
	cpu0, wall0 := cpuNow(), time.Now()
	sched := s.sched
	if sched == "" {
		sched = b.vol.DefaultScheduler
	}
	if err := b.vol.SetScheduler(sched); err != nil {
		return err
	}
	ph.Scheduler = sched
	var d *runningDaemon
	if s.daemon != nil {
		if d, err = startDaemon(b.ctx, b.o.Docker, b.o.Roots, b.vol.Name, b.run, *s.daemon, b.log); err != nil {
			return err
		}
		defer func() {
			st, serr := d.stop()
			ph.Daemon = &st
			b.finish(&ph, cpu0, wall0)
			err = errors.Join(err, serr)
		}()
	} else {
		defer b.finish(&ph, cpu0, wall0)
	}
	pc := phaseCtx{b: b, trial: trial, cfg: cfg, s: s, d: d}

	if cfg == CfgSolo {
		bulk, smp, err := pc.startBulk("bulk")
		if err != nil {
			return err
		}
		defer pc.remove(bulk)
		defer smp.stop()
		if err := sleep(b.ctx, b.p.Warm); err != nil {
			return err
		}
		t0 := time.Now()
		if err := sleep(b.ctx, b.p.Solo); err != nil {
			return err
		}
		smp.stop()
		by, secs := smp.bytesIn([]window{{t0, time.Now()}})
		ph.BulkQuietBps = by / secs
		return smp.err
	}

	// Table 3, interactive and quiet, with one bulk container.
	var smp *sampler
	var bulk *containers.Container
	var windows []window
	if s.bulk {
		bulk, smp, err = pc.startBulk("bulk")
		if err != nil {
			return err
		}
		defer pc.remove(bulk)
		defer smp.stop()
		if err := sleep(b.ctx, b.p.Warm-b.p.Gate); err != nil {
			return err
		}
	}
	for rep := 0; rep < b.p.Reps; rep++ {
		for _, size := range b.p.Sizes {
			name := "t3-" + sizeLabel(size)
			smpl, err := pc.gatedRead(name, "table3", sizeLabel(size),
				[]string{"workload", "--wait-stdin", "--json", "--drop-cache", "read", b.files[name]})
			if err != nil {
				return err
			}
			windows = append(windows, window{smpl.Start, smpl.End})
		}
	}
	_, err = pc.gatedRead("interactive", "interactive", "4k-rand",
		[]string{"workload", "--wait-stdin", "--json", "--direct", "--bs", "4k", "--rate", fmt.Sprint(b.p.InteractiveRate),
			"--duration", b.p.Interactive.String(), "randread", b.files["bulk"]})
	if err != nil {
		return err
	}
	if s.bulk {
		if err := sleep(b.ctx, b.p.QuietSettle); err != nil {
			return err
		}
		t0 := time.Now()
		if err := sleep(b.ctx, b.p.QuietMeasure); err != nil {
			return err
		}
		smp.stop()
		by, secs := smp.bytesIn([]window{{t0, time.Now()}})
		ph.BulkQuietBps = by / secs
		pc.remove(bulk)
		if smp.err != nil {
			return smp.err
		}
	}

	// Table 5: readers released 2, 2, 3, 4, 4 s after a fresh bulk container.
	w5, smp5, err := pc.table5()
	if err != nil {
		return err
	}
	if s.bulk {
		by, secs := smp.bytesIn(windows)
		by5, secs5 := smp5.bytesIn(w5)
		ph.BulkContentionSecs = secs + secs5
		if ph.BulkContentionSecs > 0 {
			ph.BulkContentionBps = (by + by5) / ph.BulkContentionSecs
		}
		return smp5.err
	}
	return nil
}

func (b *bench) finish(ph *Phase, cpu0 float64, wall0 time.Time) {
	ph.CPUSeconds = cpuNow() - cpu0
	ph.WallSeconds = time.Since(wall0).Seconds()
	b.res.Phases = append(b.res.Phases, *ph)
}

// phaseCtx is what the steps of one phase share.
type phaseCtx struct {
	b     *bench
	trial int
	cfg   string
	s     setup
	d     *runningDaemon
}

func (pc phaseCtx) name(what string) string {
	pc.b.seq++
	return fmt.Sprintf("ddiskqos-bench-%s-t%d-%s-%s-%d", pc.b.run, pc.trial, pc.cfg, what, pc.b.seq)
}

func (pc phaseCtx) spec(what string, args []string, gated bool) containers.Spec {
	return containers.Spec{Name: pc.name(what), Args: args, Gated: gated,
		Binds: map[string]string{pc.b.vol.Mount: mountIn}}
}

func (pc phaseCtx) remove(c *containers.Container) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c.Remove(ctx)
}

// cgroup returns the container's cgroup in the I/O hierarchy.
func (pc phaseCtx) cgroup(c *containers.Container) (string, error) {
	ctrl := "blkio"
	if pc.b.h.Version == 2 {
		ctrl = ""
	}
	return containers.CgroupOf(pc.b.o.Roots.Proc, c.Pid, ctrl)
}

func (pc phaseCtx) setWeight(c *containers.Container, w cgroupfs.Weight) error {
	cg, err := pc.cgroup(c)
	if err != nil {
		return err
	}
	v, err := mech.WeightValue(mech.BFQWeight, w)
	if err != nil {
		return err
	}
	return mech.Write(pc.b.h, mech.BFQWeight, pc.b.vol.Dev, cg, v)
}

// startBulk starts a container streaming the bulk file with O_DIRECT, over
// and over, and a sampler of its cgroup's reads.
func (pc phaseCtx) startBulk(what string) (*containers.Container, *sampler, error) {
	b := pc.b
	c, err := b.r.Start(b.ctx, pc.spec(what, []string{"workload", "--direct", "--loop", "read", b.files["bulk"]}, false))
	if err != nil {
		return nil, nil, err
	}
	pc.d.markBulk(c.ID)
	if pc.s.static {
		if err := pc.setWeight(c, staticBulk); err != nil {
			pc.remove(c)
			return nil, nil, err
		}
	}
	cg, err := pc.cgroup(c)
	if err != nil {
		pc.remove(c)
		return nil, nil, fmt.Errorf("bulk container: %w (logs: %s)", err, c.Stderr())
	}
	smp, err := startSampler(b.ctx, b.h, cg, b.vol.Dev, 2*time.Millisecond)
	if err != nil {
		pc.remove(c)
		return nil, nil, err
	}
	return c, smp, nil
}

// prepare starts a gated reader and, under static, gives it its weight.
func (pc phaseCtx) prepare(what string, args []string) (*containers.Container, error) {
	c, err := pc.b.r.Start(pc.b.ctx, pc.spec(what, args, true))
	if err != nil {
		return nil, err
	}
	if pc.s.static {
		if err := pc.setWeight(c, staticSmall); err != nil {
			pc.remove(c)
			return nil, err
		}
	}
	return c, nil
}

// collect waits for a released reader and turns its result into a Sample.
func (pc phaseCtx) collect(c *containers.Container, scenario, reader, daemonView string) (Sample, error) {
	defer pc.remove(c)
	ctx, cancel := context.WithTimeout(pc.b.ctx, 5*time.Minute)
	defer cancel()
	code, out, err := c.Wait(ctx)
	if err != nil {
		return Sample{}, err
	}
	if code != 0 {
		return Sample{}, fmt.Errorf("container %s exited %d: %s%s", c.Name, code, out, c.Stderr())
	}
	var r workload.Result
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &r); err != nil {
		return Sample{}, fmt.Errorf("container %s: result %q: %w", c.Name, out, err)
	}
	s := Sample{Trial: pc.trial, Config: pc.cfg, Scenario: scenario, Reader: reader, Bytes: r.Bytes,
		Seconds: r.Elapsed.Seconds(), Start: r.Start, End: r.End, Daemon: daemonView}
	if scenario == "interactive" {
		l := r.Latency
		s.Latency = &l
	}
	pc.b.res.Samples = append(pc.b.res.Samples, s)
	return s, nil
}

// gatedRead starts a reader, holds it for the gate, releases it and
// waits for its result.
func (pc phaseCtx) gatedRead(what, scenario, reader string, args []string) (Sample, error) {
	c, err := pc.prepare(what, args)
	if err != nil {
		return Sample{}, err
	}
	if err := sleep(pc.b.ctx, pc.b.p.Gate); err != nil {
		pc.remove(c)
		return Sample{}, err
	}
	view := pc.d.view(c.ID)
	if err := c.Release(); err != nil {
		pc.remove(c)
		return Sample{}, err
	}
	return pc.collect(c, scenario, reader, view)
}

// table5 runs the paper's second experiment: the readers are started
// (gated) first, then a fresh bulk container, then each reader is
// released at its time after the bulk container's start.
func (pc phaseCtx) table5() ([]window, *sampler, error) {
	b := pc.b
	var readers []*containers.Container
	defer func() {
		for _, c := range readers {
			if c != nil {
				pc.remove(c)
			}
		}
	}()
	for i, r := range b.p.Table5 {
		name := fmt.Sprintf("t5-%d-%s", i, sizeLabel(r.Size))
		c, err := pc.prepare("t5", []string{"workload", "--wait-stdin", "--json", "--drop-cache", "read", b.files[name]})
		if err != nil {
			return nil, nil, err
		}
		readers = append(readers, c)
	}
	var smp *sampler
	t0 := time.Now()
	if pc.s.bulk {
		bulk, sm, err := pc.startBulk("bulk5")
		if err != nil {
			return nil, nil, err
		}
		defer pc.remove(bulk)
		defer sm.stop()
		smp = sm
		t0 = time.Now()
	}
	views := make([]string, len(readers))
	for i, r := range b.p.Table5 {
		if err := sleep(b.ctx, time.Until(t0.Add(r.At))); err != nil {
			return nil, nil, err
		}
		views[i] = pc.d.view(readers[i].ID)
		if err := readers[i].Release(); err != nil {
			return nil, nil, err
		}
	}
	var ws []window
	for i, r := range b.p.Table5 {
		c := readers[i]
		readers[i] = nil // collect removes it
		s, err := pc.collect(c, "table5", r.Label(), views[i])
		if err != nil {
			return nil, nil, err
		}
		ws = append(ws, window{s.Start, s.End})
	}
	if smp != nil {
		smp.stop() // before the deferred removal of its cgroup
	}
	return ws, smp, nil
}
