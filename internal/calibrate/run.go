package calibrate

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
)

// Request is one run of `ddiskqos calibrate`.
type Request struct {
	Device   string // as given: /dev/sdb or sdb
	Plan     Plan
	Roots    Roots
	StateDir string // where the replaced values are kept for Restore
	// DryRun measures and derives, and writes nothing; Force calibrates
	// a device that looks in use; Restore writes back what an earlier
	// run replaced and measures nothing; JSON prints the result as JSON
	// instead of text (and no progress).
	DryRun, Force, Restore, JSON bool
}

// Run calibrates r.Device, or restores it: it checks the device and the
// cgroup hierarchy, measures (progress on out), derives iocost's model
// and qos, writes them (unless DryRun), and prints what it did on out.
// An error says what went wrong and whether anything was written.
func Run(ctx context.Context, r Request, out io.Writer) error {
	dev, err := Resolve(r.Roots, r.Device)
	if err != nil {
		return err
	}
	layout, err := cgroupfs.DetectLayout(r.Roots.Mountinfo)
	if err != nil {
		return err
	}
	hier, err := layout.IOHierarchy()
	if err != nil {
		return err
	}
	if err := CheckHierarchy(hier); err != nil {
		return fmt.Errorf("%s: %w", dev.Path, err)
	}
	if r.Restore {
		s, err := Restore(hier, r.StateDir, dev)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "restored %s (%s), saved %s:\n  io.cost.model: %s\n  io.cost.qos:   %s\n", dev.Path, dev.Dev, s.Time.Format("2006-01-02 15:04:05Z"), s.Model, s.QoS)
		return nil
	}
	why, err := InUse(r.Roots, dev)
	if err != nil {
		return fmt.Errorf("%s: %w", dev.Path, err)
	}
	if len(why) > 0 && !r.Force {
		return fmt.Errorf("%s looks in use, and calibration overwrites it (--force to go on):\n  %s", dev.Path, strings.Join(why, "\n  "))
	}

	if !r.JSON {
		fmt.Fprintf(out, "calibrating %s (%s): 8 patterns of %v\n", dev.Path, dev.Dev, r.Plan.Duration)
	}
	progress := func(m Measurement) {
		if !r.JSON {
			fmt.Fprintf(out, "  %-17s bs %-8d qd %-3d %9.1f MiB/s %9.0f IOPS  p50 %8.0fus  p99 %8.0fus\n",
				m.Pattern, m.BlockSize, m.IODepth, m.BytesPerSec/(1<<20), m.IOPS, m.Latency.P50, m.Latency.P99)
		}
	}
	ms, err := Measure(ctx, hier, r.Roots.Sys, dev, r.Plan, progress)
	if err != nil {
		return fmt.Errorf("%w (nothing written)", err)
	}
	model, qos, err := Derive(dev.Dev, ms)
	if err != nil {
		return fmt.Errorf("%s: %w (nothing written)", dev.Path, err)
	}
	if !r.DryRun {
		if err := Apply(hier, r.StateDir, dev, model, qos); err != nil {
			return fmt.Errorf("%s: %w", dev.Path, err)
		}
	}
	if r.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		res := struct {
			Device       string        `json:"device"`
			Dev          string        `json:"dev"`
			Measurements []Measurement `json:"measurements"`
			Model        string        `json:"io_cost_model"`
			QoS          string        `json:"io_cost_qos"`
			Written      bool          `json:"written"`
			Saved        string        `json:"saved,omitempty"`
		}{dev.Path, dev.Dev.String(), ms, model.Line(), qos.Line(), !r.DryRun, ""}
		if !r.DryRun {
			res.Saved = SavedPath(r.StateDir, dev)
		}
		return enc.Encode(res)
	}
	mount := hier.Mount
	if r.DryRun {
		fmt.Fprintf(out, "dry run, nothing written; to apply:\n  echo '%s' > %s/io.cost.model\n  echo '%s' > %s/io.cost.qos\n", model.Line(), mount, qos.Line(), mount)
		return nil
	}
	fmt.Fprintf(out, "written:\n  %s/io.cost.model: %s\n  %s/io.cost.qos:   %s\nprevious values in %s (ddiskqos calibrate --restore %s)\n",
		mount, model.Line(), mount, qos.Line(), SavedPath(r.StateDir, dev), dev.Path)
	return nil
}
