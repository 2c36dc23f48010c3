package host

import "slices"

// Report is the JSON of `ddiskqos check --json`, a public contract: fields
// may be added, never renamed or removed.
type Report struct {
	Cgroup  CgroupReport `json:"cgroup"`
	Devices []Device     `json:"devices"`
	Docker  *Engine      `json:"docker,omitempty"`
	// DataRoot is where the engine's data root lives, down to its disks.
	DataRoot    *DataRoot `json:"docker_data_root,omitempty"`
	QoSPossible bool      `json:"qos_possible"`
	Checks      []Check   `json:"checks"`
}

// CgroupReport is the cgroup part of a Report.
type CgroupReport struct {
	Mode        string       `json:"mode"` // v1, v2, hybrid; "" when no cgroup is mounted
	IOHierarchy *IOHierarchy `json:"io_hierarchy"`
	Unified     string       `json:"unified,omitempty"`
	V1          []V1Mount    `json:"v1,omitempty"`
	Error       string       `json:"error,omitempty"`
}

// V1Mount is one v1 hierarchy in a Report.
type V1Mount struct {
	Mountpoint  string   `json:"mountpoint"`
	Controllers []string `json:"controllers"`
}

// BuildReport assembles the report of facts and their checks.
func BuildReport(f Facts, checks []Check) Report {
	r := Report{Devices: f.Devices, Docker: f.Engine, DataRoot: f.DataRoot, QoSPossible: QoSPossible(checks), Checks: checks}
	if r.Devices == nil {
		r.Devices = []Device{}
	}
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	if f.LayoutErr != nil {
		r.Cgroup.Error = f.LayoutErr.Error()
		return r
	}
	r.Cgroup.Mode = string(f.Layout.Mode)
	r.Cgroup.Unified = f.Layout.Unified
	for _, m := range f.Layout.V1 {
		r.Cgroup.V1 = append(r.Cgroup.V1, V1Mount{Mountpoint: m.Mountpoint, Controllers: m.Controllers})
	}
	if f.IOErr != nil {
		r.Cgroup.Error = f.IOErr.Error()
	} else {
		io := f.IO
		r.Cgroup.IOHierarchy = &io
	}
	return r
}

// Scale says the check is about a limit a host of TargetContainers
// containers runs into (the limits group), not about whether and how well
// QoS works.
func (c Check) Scale() bool { return c.Group() == "limits" }

// Triage is the checks in the order a person reads them: what stops or
// weakens QoS, then the limits that stop the host from reaching
// TargetContainers, then what only some containers need, then what is
// fine. Within a part, fails come before warns and Evaluate's order is
// kept. A new check lands in its part by its status and group alone.
type Triage struct {
	QoS     []Check // fail and warn, not Scale
	Scale   []Check // fail and warn, Scale
	Info    []Check // info
	OK      []Check // ok, not Scale
	ScaleOK []Check // ok, Scale: fine limits, summarised
}

// TriageChecks sorts checks into a Triage.
func TriageChecks(cs []Check) Triage {
	var t Triage
	for _, want := range []Status{StatusFail, StatusWarn, StatusInfo, StatusOK} {
		for _, c := range cs {
			if c.Status != want {
				continue
			}
			switch {
			case want == StatusInfo:
				t.Info = append(t.Info, c)
			case want == StatusOK && c.Scale():
				t.ScaleOK = append(t.ScaleOK, c)
			case want == StatusOK:
				t.OK = append(t.OK, c)
			case c.Scale():
				t.Scale = append(t.Scale, c)
			default:
				t.QoS = append(t.QoS, c)
			}
		}
	}
	for _, c := range cs { // a status of none of the four: shown, first part
		if !slices.Contains([]Status{StatusFail, StatusWarn, StatusInfo, StatusOK}, c.Status) {
			t.QoS = append(t.QoS, c)
		}
	}
	return t
}
