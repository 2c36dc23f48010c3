package host

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// Probe says whether a cgroup interface file is offered by the kernel, and
// how that was found out.
//
// What was found on Linux 6.18 (hybrid, BFQ built in): the weight files are
// declared CFTYPE_NOT_ON_ROOT, so /sys/fs/cgroup/blkio/blkio.bfq.weight does
// not exist at the root — only in child cgroups, where it appears as soon as
// the child is created — and it appears whether or not any device uses bfq:
// the file exists once the BFQ policy is registered (module loaded or built
// in), not per device. The BFQ statistics files (blkio.bfq.io_service_bytes,
// blkio.bfq.io_serviced) have no such flag and are at the root too, so they
// are a reliable marker that needs no cgroup to be created. The probe
// therefore looks, in order, at the root, at existing child cgroups, then at
// root-level markers; it never creates anything. A file being offered does
// not make weights work on a device: that also takes the device's scheduler
// (bfq, cfq) or iocost being on for it — see Device.Mechanism.
type Probe struct {
	File    string `json:"file"`
	Present bool   `json:"present"`
	// Known is false when nothing could tell (cgroup v2 without a child
	// cgroup that has the io controller, and no root-level marker).
	Known bool   `json:"known"`
	How   string `json:"how"`
}

// IOHierarchy is the cgroup hierarchy that controls block I/O and what its
// kernel offers.
type IOHierarchy struct {
	Version int    `json:"version"`
	Mount   string `json:"mount"`
	// Enabled is false on cgroup v2 when "io" is not in the root's
	// cgroup.controllers (the io controller is bound to a v1 hierarchy, or
	// the kernel lacks it). Always true for a mounted v1 blkio.
	Enabled bool `json:"enabled"`
	// Offered is what the kernel offers of each mechanism's files
	// (mech.Mech.Needs); Throttle, BFQ, CFQ and IOCost show it in check's
	// JSON.
	Offered  map[mech.Name]Probe `json:"-"`
	Throttle Probe               `json:"throttle"`
	BFQ      Probe               `json:"bfq"`
	CFQ      Probe               `json:"cfq"`
	// IOCost is v2 only: the root's io.cost.qos (CONFIG_BLK_CGROUP_IOCOST).
	IOCost Probe `json:"iocost"`
	// IOCostQoS are the devices listed in io.cost.qos, IOCostModel those
	// of io.cost.model (v2 only).
	IOCostQoS   []cgroupfs.CostQoS   `json:"-"`
	IOCostModel []cgroupfs.CostModel `json:"-"`
	// Pressure is whether per-cgroup io.pressure exists (v2 with PSI on).
	Pressure bool `json:"pressure"`
	// Memory is v2 only: the root delegates the memory controller
	// (cgroup.subtree_control), without which writeback is charged to the
	// root, not to the cgroup whose memory holds the cached pages.
	Memory bool `json:"memory"`
}

// Hierarchy returns the cgroupfs value for it.
func (h IOHierarchy) Hierarchy() cgroupfs.Hierarchy {
	return cgroupfs.Hierarchy{Version: h.Version, Mount: h.Mount}
}

// maxProbeChildren bounds how many child cgroups a probe opens (a host with
// 10,000 containers has 10,000 of them; a few tell as much as all).
const maxProbeChildren = 16

// ProbeIOHierarchy finds the I/O hierarchy of layout and what it offers. It
// reads files only; it creates no cgroup. Without any I/O hierarchy it
// returns an error wrapping cgroupfs.ErrNoIOHierarchy.
func ProbeIOHierarchy(layout cgroupfs.Layout) (IOHierarchy, error) {
	hier, err := layout.IOHierarchy()
	if err != nil {
		return IOHierarchy{}, err
	}
	h := IOHierarchy{Version: hier.Version, Mount: hier.Mount}
	children, err := childCgroups(hier.Mount)
	if err != nil {
		return IOHierarchy{}, err
	}
	conclusive := true // on v1 every cgroup has every blkio file
	why := ""          // why nothing is offered
	if h.Version == 1 {
		h.Enabled = true
	} else {
		ctl, err := readWords(filepath.Join(hier.Mount, "cgroup.controllers"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return IOHierarchy{}, err
		}
		h.Enabled = slices.Contains(ctl, "io")
		sub, err := readWords(filepath.Join(hier.Mount, "cgroup.subtree_control"))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return IOHierarchy{}, err
		}
		// A first-level child has the io files exactly when the root
		// delegates io, so only then does a child lacking a file prove it
		// is not offered.
		conclusive = slices.Contains(sub, "io")
		h.Memory = slices.Contains(sub, "memory")
		if !h.Enabled {
			why = "io is not in " + filepath.Join(hier.Mount, "cgroup.controllers")
		}
	}
	// Each mechanism of the registry says which file shows it offered.
	h.Offered = map[mech.Name]Probe{}
	for _, m := range mech.All() {
		if m.Needs != nil {
			h.Offered[m.Name] = probeNeed(hier, *m.Needs, why, children, conclusive)
		}
	}
	h.Throttle, h.BFQ, h.CFQ, h.IOCost = h.Offered[mech.Throttle], h.Offered[mech.BFQWeight], h.Offered[mech.CFQWeight], h.Offered[mech.IOCostWeight]
	if h.Version == 1 || !h.Enabled {
		return h, nil
	}
	if h.IOCost.Present {
		qos, err := hier.ReadCostQoS()
		if err != nil && !errors.Is(err, cgroupfs.ErrNotAvailable) {
			return IOHierarchy{}, err
		}
		h.IOCostQoS = qos
		model, err := hier.ReadCostModel()
		if err != nil && !errors.Is(err, cgroupfs.ErrNotAvailable) {
			return IOHierarchy{}, err
		}
		h.IOCostModel = model
	}
	h.Pressure = exists(filepath.Join(hier.Mount, "io.pressure"))
	return h, nil
}

// iocostEnabled reports whether io.cost.qos has enable=1 for the device.
func (h IOHierarchy) iocostEnabled(major, minor uint32) bool {
	q, ok := cgroupfs.FindCostQoS(h.IOCostQoS, cgroupfs.Dev{Major: major, Minor: minor})
	return ok && q.Enable
}

// probeNeed is what the hierarchy offers of what n needs: nothing, for
// why, when why is not "".
func probeNeed(hier cgroupfs.Hierarchy, n mech.Needs, why string, children []string, conclusive bool) Probe {
	need := n.On(hier.Version)
	file := need.File
	if file == "" { // none on this version: the other's names it
		file = n.On(3 - hier.Version).File
	}
	switch {
	case why != "":
		return Probe{File: file, Known: true, How: why}
	case need.File == "":
		return Probe{File: file, Known: true, How: need.Absent}
	case need.RootOnly:
		path := filepath.Join(hier.Mount, need.File)
		if exists(path) {
			return Probe{File: file, Present: true, Known: true, How: "seen: " + path}
		}
		return Probe{File: file, Known: true, How: "no " + path + ": " + need.Absent}
	}
	return probeFile(hier.Mount, need.File, need.Markers, children, conclusive)
}

func probeFile(mount, file string, markers, children []string, childConclusive bool) Probe {
	p := Probe{File: file}
	if root := filepath.Join(mount, file); exists(root) {
		p.Present, p.Known, p.How = true, true, "seen at the root: "+root
		return p
	}
	for _, c := range children {
		if f := filepath.Join(c, file); exists(f) {
			p.Present, p.Known, p.How = true, true, "seen in a child cgroup: "+f
			return p
		}
	}
	if len(children) > 0 && childConclusive {
		p.Known, p.How = true, "absent from the child cgroup "+children[0]
		return p
	}
	for _, m := range markers {
		if root := filepath.Join(mount, m); exists(root) {
			p.Present, p.Known = true, true
			p.How = fmt.Sprintf("inferred: %s exists only in child cgroups, and the root's %s shows the policy is registered", file, m)
			return p
		}
	}
	if len(markers) > 0 {
		p.Known = true
		p.How = fmt.Sprintf("no %s in a child cgroup and no %s at the root", file, strings.Join(markers, " or "))
		return p
	}
	p.How = fmt.Sprintf("not verified: %s exists only in child cgroups and none with it exists yet", file)
	return p
}

// childCgroups returns up to maxProbeChildren first-level child cgroups of
// mount, in name order.
func childCgroups(mount string) ([]string, error) {
	ents, err := os.ReadDir(mount)
	if err != nil {
		return nil, fmt.Errorf("list cgroups in %s: %w", mount, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(mount, e.Name()))
			if len(out) == maxProbeChildren {
				break
			}
		}
	}
	return out, nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func readWords(p string) ([]string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(b)), nil
}
