package calibrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// ErrNoIOCost means the host's I/O hierarchy has no iocost: cgroup v1, or
// a kernel without CONFIG_BLK_CGROUP_IOCOST.
var ErrNoIOCost = errors.New("no iocost on this host")

// CheckHierarchy says whether h can take an io.cost.model at all.
func CheckHierarchy(h cgroupfs.Hierarchy) error {
	if h.Version != 2 {
		return fmt.Errorf("%w: iocost exists only on cgroup v2, and this host's io controller is on cgroup v%d (%s)", ErrNoIOCost, h.Version, h.Mount)
	}
	if _, err := os.Stat(filepath.Join(h.Mount, "io.cost.model")); err != nil {
		return fmt.Errorf("%w: no %s (kernel built without CONFIG_BLK_CGROUP_IOCOST, or the io controller is not on this cgroup2)", ErrNoIOCost, filepath.Join(h.Mount, "io.cost.model"))
	}
	return nil
}

// Current returns d's lines of io.cost.model and io.cost.qos; a device not
// listed yet gets the kernel's auto values (Ctrl "auto", not enabled).
func Current(h cgroupfs.Hierarchy, d Device) (cgroupfs.CostModel, cgroupfs.CostQoS, error) {
	ms, err := h.ReadCostModel()
	if err != nil {
		return cgroupfs.CostModel{}, cgroupfs.CostQoS{}, err
	}
	qs, err := h.ReadCostQoS()
	if err != nil {
		return cgroupfs.CostModel{}, cgroupfs.CostQoS{}, err
	}
	m, ok := cgroupfs.FindCostModel(ms, d.Dev)
	if !ok {
		m = cgroupfs.CostModel{Dev: d.Dev, Ctrl: "auto"}
	}
	q, ok := cgroupfs.FindCostQoS(qs, d.Dev)
	if !ok {
		q = cgroupfs.CostQoS{Dev: d.Dev, Ctrl: "auto"}
	}
	return m, q, nil
}

// Measure runs the plan's patterns on d, one after the other, and reports
// each to progress (may be nil) as it ends. For the run, as
// iocost_coef_gen.py does, the device's scheduler is none and merges are
// off, and iocost is off for it, so neither the old model nor a scheduler
// shapes what is measured; all three are put back before Measure returns.
// The write patterns overwrite the device's data.
func Measure(ctx context.Context, h cgroupfs.Hierarchy, sys string, d Device, p Plan, progress func(Measurement)) (ms []Measurement, err error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	_, q, err := Current(h, d)
	if err != nil {
		return nil, err
	}
	if q.Enable {
		off := d.Dev.String() + " enable=0"
		if err := h.WriteCostQoS(off); err != nil {
			return nil, err
		}
		defer func() {
			if rerr := h.WriteCostQoS(q.Line()); rerr != nil {
				err = errors.Join(err, fmt.Errorf("put back io.cost.qos: %w", rerr))
			}
		}()
	}
	restore, err := quietQueue(sys, d.Name)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, restore()) }()
	for _, ns := range p.Specs(d.Path) {
		r, rerr := workload.Run(ctx, ns.Spec)
		if rerr != nil {
			return ms, fmt.Errorf("pattern %s on %s: %w", ns.Pattern, d.Path, rerr)
		}
		if ctx.Err() != nil {
			return ms, ctx.Err()
		}
		m := FromResult(ns.Pattern, r)
		ms = append(ms, m)
		if progress != nil {
			progress(m)
		}
	}
	return ms, nil
}

// quietQueue sets the device's scheduler to none and nomerges to 2 (no
// merging at all: each 4 KiB request stays one request) and returns what
// puts them back. A device without the files (bio-based) is left alone.
func quietQueue(sys, name string) (func() error, error) {
	q := filepath.Join(sys, "block", name, "queue")
	var undo []func() error
	restore := func() error {
		var errs []error
		for i := len(undo) - 1; i >= 0; i-- {
			errs = append(errs, undo[i]())
		}
		return errors.Join(errs...)
	}
	set := func(file, val, old string) error {
		p := filepath.Join(q, file)
		if err := os.WriteFile(p, []byte(val), 0); err != nil {
			return fmt.Errorf("write %q to %s: %w", val, p, err)
		}
		undo = append(undo, func() error {
			if err := os.WriteFile(p, []byte(old), 0); err != nil {
				return fmt.Errorf("put back %q to %s: %w", old, p, err)
			}
			return nil
		})
		return nil
	}
	if b, err := os.ReadFile(filepath.Join(q, "scheduler")); err == nil {
		active, offered, err := host.ParseScheduler(string(b))
		if err != nil {
			return nil, err
		}
		if active != "none" && len(offered) > 1 {
			if err := set("scheduler", "none", active); err != nil {
				return nil, err
			}
		}
	}
	if b, err := os.ReadFile(filepath.Join(q, "nomerges")); err == nil {
		if old := strings.TrimSpace(string(b)); old != "2" {
			if err := set("nomerges", "2", old); err != nil {
				return nil, errors.Join(err, restore())
			}
		}
	}
	return restore, nil
}

// Saved is what Apply replaced, kept to be written back.
type Saved struct {
	Device string    `json:"device"`
	Dev    string    `json:"dev"`
	Model  string    `json:"model"` // io.cost.model line to write back
	QoS    string    `json:"qos"`   // io.cost.qos line to write back
	Time   time.Time `json:"time"`
}

// SavedPath is where Apply keeps d's previous values under stateDir.
func SavedPath(stateDir string, d Device) string {
	return filepath.Join(stateDir, fmt.Sprintf("iocost-%d-%d.json", d.Dev.Major, d.Dev.Minor))
}

// Apply writes model and qos for d, first saving the values they replace
// under stateDir unless a saved file is there already (a second
// calibration keeps the first one's originals), and reads them back.
func Apply(h cgroupfs.Hierarchy, stateDir string, d Device, model cgroupfs.CostModel, qos cgroupfs.CostQoS) error {
	if model.Dev != d.Dev || qos.Dev != d.Dev {
		return fmt.Errorf("model for %s and qos for %s do not belong to %s (%s)", model.Dev, qos.Dev, d.Name, d.Dev)
	}
	prevModel, prevQoS, err := Current(h, d)
	if err != nil {
		return err
	}
	path := SavedPath(stateDir, d)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		s := Saved{Device: d.Name, Dev: d.Dev.String(), Model: prevModel.Line(), QoS: prevQoS.Line(), Time: time.Now().UTC()}
		if err := writeSaved(path, s); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if err := h.WriteCostModel(model.Line()); err != nil {
		return err
	}
	if err := h.WriteCostQoS(qos.Line()); err != nil {
		return errors.Join(err, h.WriteCostModel(prevModel.Line()))
	}
	gotModel, gotQoS, err := Current(h, d)
	if err != nil {
		return err
	}
	model.Model = gotModel.Model
	if gotModel != model {
		return fmt.Errorf("io.cost.model reads back %q after writing %q", gotModel.Line(), model.Line())
	}
	if gotQoS.Line() != qos.Line() {
		return fmt.Errorf("io.cost.qos reads back %q after writing %q", gotQoS.Line(), qos.Line())
	}
	return nil
}

// Restore writes back the values Apply saved for d and removes the saved
// file. Without one it is an error that names the path.
func Restore(h cgroupfs.Hierarchy, stateDir string, d Device) (Saved, error) {
	path := SavedPath(stateDir, d)
	b, err := os.ReadFile(path)
	if err != nil {
		return Saved{}, fmt.Errorf("nothing to restore for %s: %w", d.Name, err)
	}
	var s Saved
	if err := json.Unmarshal(b, &s); err != nil {
		return Saved{}, fmt.Errorf("%s: %w", path, err)
	}
	if s.Dev != d.Dev.String() {
		return Saved{}, fmt.Errorf("%s: saved for device %s, not %s (%s)", path, s.Dev, d.Name, d.Dev)
	}
	for _, line := range []string{s.Model, s.QoS} {
		if !strings.HasPrefix(line, s.Dev+" ") {
			return Saved{}, fmt.Errorf("%s: line %q is not for %s", path, line, s.Dev)
		}
	}
	if err := h.WriteCostQoS(s.QoS); err != nil {
		return Saved{}, err
	}
	if err := h.WriteCostModel(s.Model); err != nil {
		return Saved{}, err
	}
	return s, os.Remove(path)
}

func writeSaved(path string, s Saved) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
