package contention

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/calibrate"
	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/loopdev"
)

// What the rig does differently on cgroup v2:
//
//   - the run's parent cgroup gets the io controller (and memory, when the
//     root offers it, so buffered writes are charged to the writer's
//     cgroup) in its cgroup.subtree_control;
//   - static and the BFQ weights are io.bfq.weight, the fixed throttle is
//     io.max, the counters are io.stat;
//   - ddiskqos runs with iocost enabled on the volume's device with the
//     model and latency targets `ddiskqos calibrate` derives (package
//     calibrate), so its mechanism is iocost-weight; every other
//     configuration runs with iocost off. ddiskqos-bfq runs on BFQ with
//     iocost off (bfq-weight), as on v1.

// IOCost is the iocost calibration of a v2 run.
type IOCost struct {
	// Model and QoS are the io.cost.model and io.cost.qos lines written for
	// the volume's device in the ddiskqos cells.
	Model string `json:"model"`
	QoS   string `json:"qos"`
	// Twin is how the figures were measured: a second loop device over a
	// fully written file on the same disk as the volume's (calibration
	// overwrites the device it measures, and the volume's sparse file would
	// read its holes as zeros without touching the disk).
	Twin         string                  `json:"twin"`
	PatternTime  time.Duration           `json:"pattern_ns"`
	Measurements []calibrate.Measurement `json:"measurements"`
}

// TwinMiB is the size of the calibration twin's file.
const TwinMiB = 512

// CalibrationPattern is how long each of calibrate's 8 patterns runs on the
// twin (the CLI's default is 10 s).
const CalibrationPattern = 3 * time.Second

// enableV2Controllers gives the children of the run's parent the io
// controller, and memory when the parent's own parent offers it. It
// reports whether memory is on.
func enableV2Controllers(h cgroupfs.Hierarchy, parent string) (memory bool, err error) {
	dir, err := h.Path(parent)
	if err != nil {
		return false, err
	}
	ctl := filepath.Join(dir, "cgroup.subtree_control")
	if err := os.WriteFile(ctl, []byte("+io +memory"), 0); err == nil {
		return true, nil
	}
	if err := os.WriteFile(ctl, []byte("+io"), 0); err != nil {
		return false, fmt.Errorf("enable io for the children: write +io to %s: %w (is io in %s/cgroup.subtree_control?)", ctl, err, h.Mount)
	}
	return false, nil
}

// weightFile is the BFQ weight file of static's cgroups: it takes a plain
// weight, the cgroup's default for every device.
func weightFile(h cgroupfs.Hierarchy) string {
	if h.Version == 2 {
		return "io.bfq.weight"
	}
	return "blkio.bfq.weight"
}

// calibrateTwin measures a twin of the volume's device with calibrate's
// patterns and derives the model and QoS for dev, the volume's device: a
// file of TwinMiB written in full in dir (the disk under the volume),
// attached as a loop device with direct I/O, measured, detached and
// removed.
func calibrateTwin(ctx context.Context, h cgroupfs.Hierarchy, sys, dir string, dev cgroupfs.Dev,
	log func(string, ...any)) (ic *IOCost, model cgroupfs.CostModel, qos cgroupfs.CostQoS, err error) {
	tmp, err := os.MkdirTemp(dir, "ddiskqos-bench-calibrate-")
	if err != nil {
		return nil, model, qos, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	file := filepath.Join(tmp, "twin.img")
	if err := writeFull(file, TwinMiB); err != nil {
		return nil, model, qos, err
	}
	ld, err := loopdev.Attach(file, true)
	if err != nil {
		return nil, model, qos, err
	}
	defer func() { err = errors.Join(err, ld.Detach()) }()
	if !ld.Direct {
		return nil, model, qos, fmt.Errorf("calibration twin %s over %s: no direct I/O", ld.Path, file)
	}
	d, err := calibrate.Resolve(calibrate.Roots{Sys: sys, Dev: "/dev"}, ld.Name)
	if err != nil {
		return nil, model, qos, err
	}
	plan := calibrate.DefaultPlan()
	plan.Duration, plan.Span = CalibrationPattern, TwinMiB<<20
	log("calibrating iocost on %s (a %d MiB file beside the volume): 8 patterns of %s", ld.Name, TwinMiB, plan.Duration)
	ms, err := calibrate.Measure(ctx, h, sys, d, plan, nil)
	if err != nil {
		return nil, model, qos, err
	}
	if model, qos, err = calibrate.Derive(dev, ms); err != nil {
		return nil, model, qos, err
	}
	ic = &IOCost{Model: model.Line(), QoS: qos.Line(), Twin: ld.Name, PatternTime: plan.Duration, Measurements: ms}
	log("iocost for %s: io.cost.model %q, io.cost.qos %q", dev, ic.Model, ic.QoS)
	return ic, model, qos, nil
}

// writeFull writes mib MiB of non-zero data to a new file and syncs it.
func writeFull(file string, mib int) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = byte(i*13 + 7)
	}
	for range mib {
		if _, err := f.Write(chunk); err != nil {
			f.Close()
			return fmt.Errorf("write %s: %w", file, err)
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", file, err)
	}
	return f.Close()
}

// iocostOn enables iocost on the volume's device with the calibrated model
// and QoS, keeping what it replaces under stateDir; the returned function
// puts that back.
func (b *bench) iocostOn() (func() error, error) {
	d := calibrate.Device{Name: b.vol.Name, Path: b.vol.Path, Dev: b.vol.Dev}
	if err := calibrate.Apply(b.h, b.iocostState, d, b.costModel, b.costQoS); err != nil {
		return nil, fmt.Errorf("enable iocost on %s: %w", b.vol.Name, err)
	}
	return func() error {
		if _, err := calibrate.Restore(b.h, b.iocostState, d); err != nil {
			return fmt.Errorf("disable iocost on %s: %w", b.vol.Name, err)
		}
		return nil
	}, nil
}
