package contention

// One cell: a victim beside a neighbour under one configuration.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// neighbourSpec is the workload of a neighbour, until stopped.
func (b *bench) neighbourSpec(n Neighbour) workload.Spec {
	switch n {
	case SeqRead:
		return workload.Spec{Op: workload.OpRead, Path: b.files.big, Direct: true, BlockSize: 1 << 20, IODepth: 32, Loop: true}
	case RandRead:
		return workload.Spec{Op: workload.OpRandRead, Path: b.files.big, Direct: true, BlockSize: 4 << 10, IODepth: 32}
	case DirectWrite:
		return workload.Spec{Op: workload.OpWrite, Path: b.files.dw, Create: true, Size: b.p.WriteSpan, Direct: true,
			BlockSize: 1 << 20, IODepth: 32, Loop: true}
	case BufWrite:
		return workload.Spec{Op: workload.OpWrite, Path: b.files.bw, Create: true, Size: b.p.WriteSpan,
			BlockSize: 1 << 20, Loop: true, FsyncEvery: b.p.FsyncEvery}
	}
	panic("unknown neighbour " + string(n))
}

// start starts a workload in cgroup rel; it has done no I/O yet (Go).
func (b *bench) start(ctx context.Context, rel string, s workload.Spec) (*workload.Proc, error) {
	args := append(append([]string(nil), b.o.ExeArgs...), "--wait-stdin", "--json")
	args = append(args, s.Args()...)
	p, err := workload.Start(ctx, b.o.Exe, b.o.Env, args)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	b.procs = append(b.procs, p)
	b.mu.Unlock()
	if err := b.h.AddProcess(rel, p.Pid()); err != nil {
		return nil, err
	}
	return p, nil
}

// wait reaps p and forgets it.
func (b *bench) wait(p *workload.Proc) (workload.Result, error) {
	r, err := p.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.procs = slices.DeleteFunc(b.procs, func(q *workload.Proc) bool { return q == p })
	return r, err
}

// runVictim runs s in a new cgroup to its end and removes the cgroup.
func (b *bench) runVictim(ctx context.Context, name string, c Config, s workload.Spec) (workload.Result, error) {
	rel, err := b.cgroup(name)
	if err != nil {
		return workload.Result{}, err
	}
	if c == Static {
		if err := b.setBFQWeight(rel, VictimWeight); err != nil {
			return workload.Result{}, err
		}
	}
	p, err := b.start(ctx, rel, s)
	if err != nil {
		return workload.Result{}, err
	}
	if err := p.Go(); err != nil {
		return workload.Result{}, err
	}
	r, err := b.wait(p)
	if err != nil {
		return r, err
	}
	return r, b.h.Remove(rel)
}

func (b *bench) setBFQWeight(rel string, w int) error {
	dir, err := b.h.Path(rel)
	if err != nil {
		return err
	}
	f := filepath.Join(dir, weightFile(b.h))
	if err := os.WriteFile(f, []byte(strconv.Itoa(w)), 0); err != nil {
		return fmt.Errorf("write %d to %s: %w", w, f, err)
	}
	return nil
}

// noQoSWarm is the neighbour's warm-up throughput (cgroup counters) under
// Original in this trial, or an earlier one: the fixed throttle's base.
func noQoSWarm(res *Result, trial int, nb Neighbour) (float64, bool) {
	for i := len(res.Cells) - 1; i >= 0; i-- {
		c := res.Cells[i]
		if c.Config == Original && c.Neighbour == nb && c.Trial <= trial && c.NB != nil {
			return max(c.NB.Warm.Cgroup, c.NB.Process), true
		}
	}
	return 0, false
}

// cell runs one configuration with one neighbour (none for Idle).
func (b *bench) cell(ctx context.Context, res *Result, trial int, c Config, nb Neighbour) (cell Cell, err error) {
	t0 := time.Now()
	cell = Cell{Trial: trial + 1, Config: c, Neighbour: nb, Scheduler: b.scheduler(c)}
	if err := b.vol.SetScheduler(cell.Scheduler); err != nil {
		return cell, err
	}
	defer func() {
		if serr := b.vol.SetScheduler(b.vol.DefaultScheduler); serr != nil {
			err = errors.Join(err, serr)
		}
		cell.Wall = time.Since(t0).Seconds()
	}()
	if c == DDiskQoS && b.h.Version == 2 {
		restore, ierr := b.iocostOn()
		if ierr != nil {
			return cell, ierr
		}
		defer func() { err = errors.Join(err, restore()) }()
	}
	var d *runningDaemon
	if c.daemon() {
		if d, err = startDaemon(ctx, b.o.Roots, b.vol.Name, b.parent, "", false); err != nil {
			return cell, fmt.Errorf("start ddiskqos: %w", err)
		}
		defer func() {
			st, derr := d.stop()
			cell.Daemon = &st
			if derr != nil {
				err = errors.Join(err, fmt.Errorf("ddiskqos: %w", derr))
			}
		}()
	}

	var nbProc *workload.Proc
	var smp *sampler
	var nbRel string
	if nb != "" {
		if nbRel, err = b.cgroup(string(nb)); err != nil {
			return cell, err
		}
		cell.NB = &NeighbourStats{}
		switch c {
		case Static:
			if err := b.setBFQWeight(nbRel, NeighbourWeight); err != nil {
				return cell, err
			}
		case ThrottleFixed:
			base, ok := noQoSWarm(res, trial+1, nb)
			if !ok {
				return cell, errors.New("no original cell before it to size the fixed throttle from")
			}
			cell.NB.Cap = uint64(base * ThrottleShare)
			if err := b.h.SetLimits(nbRel, b.vol.Dev, cgroupfs.Limits{RBps: cell.NB.Cap, WBps: cell.NB.Cap}); err != nil {
				return cell, err
			}
		}
		if nbProc, err = b.start(ctx, nbRel, b.neighbourSpec(nb)); err != nil {
			return cell, err
		}
		if smp, err = startSampler(b.h, nbRel, b.vol.Dev, filepath.Join(b.o.Roots.Sys, "block", b.vol.Name, "stat"), b.p.SampleEvery); err != nil {
			return cell, err
		}
		defer smp.stop()
		if err := nbProc.Go(); err != nil {
			return cell, err
		}
		smp.mark() // the neighbour's start
		if !sleepCtx(ctx, b.p.Warmup) {
			return cell, ctx.Err()
		}
	}

	// The victims, each in a new cgroup, one after the other.
	vStart := time.Now()
	web, err := b.runVictim(ctx, "web", c, workload.Spec{Op: workload.OpRandRead, Path: b.files.web, Direct: true,
		BlockSize: 4 << 10, IOPS: b.p.WebIOPS, Duration: b.p.Web})
	if err != nil {
		return cell, fmt.Errorf("web victim: %w", err)
	}
	cell.Web, cell.WebOps = web.Latency, web.Ops
	if web.Response != nil {
		cell.WebResponse = *web.Response
	}
	cell.Cold = make([][]float64, len(ColdSizes))
	for range b.p.ColdReads {
		for i, s := range ColdSizes {
			r, err := b.runVictim(ctx, fmt.Sprintf("cold%dm", s>>20), c, workload.Spec{Op: workload.OpRead,
				Path: b.cold[i], DropCache: true, BlockSize: 1 << 20})
			if err != nil {
				return cell, fmt.Errorf("cold %d MiB read: %w", s>>20, err)
			}
			if r.Bytes != s {
				return cell, fmt.Errorf("cold %d MiB read moved %d bytes", s>>20, r.Bytes)
			}
			cell.Cold[i] = append(cell.Cold[i], float64(r.Elapsed)/1e6)
		}
	}
	vEnd := time.Now()

	if nb != "" {
		r, err := b.stopLoad(ctx, nbProc, smp, b.p.After, "neighbour")
		if err != nil {
			return cell, err
		}
		s := cell.NB
		warmEnd := vStart
		s.Warm = smp.window(warmEnd.Add(-b.p.Warmup/2), warmEnd)
		s.During = smp.window(vStart, vEnd)
		s.After1 = smp.window(vEnd, vEnd.Add(time.Second))
		s.After2 = smp.window(vEnd.Add(time.Second), vEnd.Add(2*time.Second))
		s.Process, s.Fsyncs, s.Samples = r.BytesPerSec, r.Fsyncs, smp.count()
		if err := b.h.Remove(nbRel); err != nil {
			return cell, err
		}
	}
	return cell, nil
}

// coldPart is the cold reads' medians for a cell's progress line.
func coldPart(cold [][]float64) string {
	var s string
	for i, sz := range ColdSizes {
		if len(cold) > i && len(cold[i]) > 0 {
			s += fmt.Sprintf(", cold %d MiB %.1f ms", sz>>20, median(cold[i]))
		}
	}
	return s
}

// cellLine is the progress line of a cell.
func cellLine(c Cell) string {
	s := fmt.Sprintf("trial %d %-14s %-11s web p50 %7.0f µs p99 %8.0f µs", c.Trial, c.Config, cmpOr(string(c.Neighbour), "-"), c.Web.P50, c.Web.P99)
	s += coldPart(c.Cold)
	if c.NB != nil {
		s += fmt.Sprintf(", neighbour %.0f/%.0f/%.0f MiB/s warm/during/after", c.NB.Warm.Cgroup/(1<<20), c.NB.During.Cgroup/(1<<20), c.NB.After2.Cgroup/(1<<20))
	}
	return s
}

// stopLoad ends a cell's load (the neighbour, the streamer) after its after
// period and its sampler with it, and returns what the load did.
func (b *bench) stopLoad(ctx context.Context, p *workload.Proc, smp *sampler, after time.Duration, what string) (workload.Result, error) {
	if !sleepCtx(ctx, after) {
		return workload.Result{}, ctx.Err()
	}
	if err := p.Stop(); err != nil {
		return workload.Result{}, err
	}
	r, err := b.wait(p)
	if err != nil {
		return r, fmt.Errorf("%s: %w", what, err)
	}
	smp.stop()
	return r, smp.err()
}
