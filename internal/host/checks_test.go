package host

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
)

func find(cs []Check, id string) (Check, bool) {
	for _, c := range cs {
		if c.ID == id {
			return c, true
		}
	}
	return Check{}, false
}

func TestEvaluateSample(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	ep, err := ParseDockerHost(hosttest.FakeEngine(t, tr.Root, hosttest.Engine{Version: "20.10.24", APIVersion: "1.41", CgroupDriver: "cgroupfs", CgroupVersion: "1"}))
	if err != nil {
		t.Fatal(err)
	}
	f := Gather(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, &ep)
	cs := Evaluate(f)
	if !QoSPossible(cs) {
		t.Errorf("QoS not possible on the sample: %+v", cs)
	}
	seen := map[string]bool{}
	for _, c := range cs {
		if seen[c.ID] {
			t.Errorf("duplicate id %s", c.ID)
		}
		seen[c.ID] = true
		if c.Why == "" {
			t.Errorf("%s has no why", c.ID)
		}
		if c.Status != StatusOK && c.Status != StatusWarn && c.Status != StatusFail && c.Status != StatusInfo {
			t.Errorf("%s: status %q", c.ID, c.Status)
		}
	}
	for id, want := range map[string]Status{
		"cgroup.layout":            StatusOK,
		"cgroup.io_hierarchy":      StatusOK,
		"device.vda.mechanism":     StatusWarn,
		"device.sda.mechanism":     StatusOK,
		"device.loop0.mechanism":   StatusWarn,
		"device.dm-0.mechanism":    StatusWarn,
		"device.usable":            StatusOK,
		"device.skipped":           StatusOK,
		"psi.io":                   StatusOK,
		"psi.cgroup":               StatusWarn,
		"docker.engine":            StatusOK,
		"docker.cgroup":            StatusOK,
		"limits.docker.nofile":     StatusWarn,
		"limits.docker.nproc":      StatusWarn,
		"limits.nofile":            StatusOK, // hard 524288; Go raises soft to hard
		"limits.pty_max":           StatusWarn,
		"limits.threads_max":       StatusOK,
		"limits.pid_max":           StatusWarn,
		"limits.inotify_instances": StatusWarn,
		"limits.inotify_watches":   StatusOK,
		"limits.bridge_ports":      StatusWarn,
	} {
		c, ok := find(cs, id)
		if !ok {
			t.Errorf("no check %s", id)
			continue
		}
		if c.Status != want {
			t.Errorf("%s: %s (%s), want %s", id, c.Status, c.Value, want)
		}
		if c.Status != StatusOK && c.Fix == "" && id != "psi.cgroup" && !strings.HasPrefix(id, "device.dm-") {
			t.Errorf("%s is %s without a fix", id, c.Status)
		}
	}
	for _, id := range []string{"device.loop1.mechanism", "device.zram0.mechanism"} {
		if _, ok := find(cs, id); ok {
			t.Errorf("%s: non-target device checked", id)
		}
	}
	if c, _ := find(cs, "limits.bridge_ports"); c.Value != "br-full 950/1024, docker0 3/1024" {
		t.Errorf("bridge ports value %q", c.Value)
	}
	if c, _ := find(cs, "limits.docker.nofile"); c.Value != "soft 20000, hard 20000 (dockerd pid 1427)" {
		t.Errorf("docker nofile value %q", c.Value)
	}
}

func TestEvaluateFailures(t *testing.T) {
	t.Parallel()
	t.Run("no cgroup mounts", func(t *testing.T) {
		t.Parallel()
		tr := hosttest.New(t)
		tr.Mountinfo()
		tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
		cs := Evaluate(Gather(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, nil))
		if QoSPossible(cs) {
			t.Error("QoS possible without cgroups")
		}
		if c, _ := find(cs, "cgroup.layout"); c.Status != StatusFail {
			t.Errorf("cgroup.layout %+v", c)
		}
		if c, _ := find(cs, "device.usable"); c.Status != StatusFail || c.Fix == "" {
			t.Errorf("device.usable %+v", c)
		}
		if _, ok := find(cs, "docker.engine"); ok {
			t.Error("docker checked though not asked")
		}
	})
	t.Run("no target device", func(t *testing.T) {
		t.Parallel()
		tr := hosttest.New(t)
		tr.HybridV1(true)
		tr.AddDisk(hosttest.Disk{Name: "loop0", Dev: "7:0", Scheduler: hosttest.SchedNone})
		tr.AddDisk(hosttest.Disk{Name: "zram0", Dev: "253:0", Sectors: 100})
		cs := Evaluate(Gather(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, nil))
		if QoSPossible(cs) {
			t.Error("QoS possible without a target device")
		}
		c, _ := find(cs, "device.skipped")
		if c.Value != "loop device with no backing file: loop0; memory-backed: no disk time to share: zram0" {
			t.Errorf("device.skipped %q", c.Value)
		}
		// Missing proc files are warnings, not failures.
		for _, id := range []string{"limits.pty_max", "limits.docker.nofile", "limits.nofile", "psi.io"} {
			if c, _ := find(cs, id); c.Status != StatusWarn {
				t.Errorf("%s: %+v", id, c)
			}
		}
	})
	t.Run("docker unreachable is a warning", func(t *testing.T) {
		t.Parallel()
		tr := hosttest.Sample(t)
		ep, _ := ParseDockerHost("unix://" + filepath.Join(tr.Root, "nothing.sock"))
		cs := Evaluate(Gather(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, &ep))
		c, _ := find(cs, "docker.engine")
		if c.Status != StatusWarn || !strings.Contains(c.Value, "unreachable") {
			t.Errorf("docker.engine %+v", c)
		}
		if !QoSPossible(cs) {
			t.Error("an unreachable engine made QoS impossible")
		}
	})
}

func TestLimitThresholds(t *testing.T) {
	t.Parallel()
	base := Facts{
		Layout: cgroupfs.Layout{Mode: cgroupfs.ModeV2, Unified: "/sys/fs/cgroup"},
		IO:     IOHierarchy{Version: 2, Mount: "/sys/fs/cgroup", Enabled: true, Pressure: true},
	}
	for _, tc := range []struct {
		id   string
		set  func(f *Facts)
		want Status
	}{
		{"limits.pty_max", func(f *Facts) { f.PtyMax = Sysctl{Name: "kernel.pty.max", Value: MinPtyMax, Present: true} }, StatusOK},
		{"limits.pty_max", func(f *Facts) { f.PtyMax = Sysctl{Name: "kernel.pty.max", Value: MinPtyMax - 1, Present: true} }, StatusWarn},
		{"limits.pid_max", func(f *Facts) { f.PidMax = Sysctl{Name: "kernel.pid_max", Value: 4194304, Present: true} }, StatusOK},
		{"limits.pid_max", func(f *Facts) { f.PidMax = Sysctl{Name: "kernel.pid_max", Err: errors.New("boom")} }, StatusWarn},
		{"limits.docker.nofile", func(f *Facts) {
			f.Dockerd = ProcLimits{PID: 9, Limits: []Limit{{Name: "Max open files", Soft: Unlimited, Hard: Unlimited}}}
		}, StatusOK},
		{"limits.docker.nofile", func(f *Facts) {
			f.Dockerd = ProcLimits{PID: 9, Limits: []Limit{{Name: "Max open files", Soft: MinDockerNoFile - 1, Hard: Unlimited}}}
		}, StatusWarn},
		{"limits.nofile", func(f *Facts) { f.Self = []Limit{{Name: "Max open files", Soft: 1024, Hard: MinSelfNoFile}} }, StatusOK},
		{"limits.nofile", func(f *Facts) { f.Self = []Limit{{Name: "Max open files", Soft: 1024, Hard: 4096}} }, StatusWarn},
		{"limits.bridge_ports", func(f *Facts) { f.Bridges = []Bridge{{"docker0", BridgePortsWarn}} }, StatusOK},
		{"limits.bridge_ports", func(f *Facts) { f.Bridges = []Bridge{{"docker0", BridgePortsWarn + 1}} }, StatusWarn},
		{"limits.bridge_ports", func(f *Facts) {}, StatusOK},
		{"psi.cgroup", func(f *Facts) {}, StatusOK},
		{"docker.cgroup", func(f *Facts) {
			f.Engine = &Engine{Reachable: true, CgroupDriver: "systemd", CgroupVersion: "1"}
		}, StatusWarn},
	} {
		f := base
		tc.set(&f)
		c, ok := find(Evaluate(f), tc.id)
		if !ok || c.Status != tc.want {
			t.Errorf("%s: got %+v, want %s", tc.id, c, tc.want)
		}
	}
}

func TestBuildReport(t *testing.T) {
	t.Parallel()
	r := BuildReport(Facts{LayoutErr: cgroupfs.ErrNoCgroupMounts}, nil)
	if r.Cgroup.Error == "" || r.Cgroup.IOHierarchy != nil || r.Devices == nil || r.Checks == nil || !r.QoSPossible {
		t.Errorf("report %+v", r)
	}
}

// TestIOCostModelCheck warns about a disk with iocost on and the kernel's
// default model, names the calibrate command as the fix, and is quiet once
// the model was written (ctrl=user).
func TestIOCostModelCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, model string
		warn        bool
	}{
		{"kernel's model", "8:0 ctrl=auto model=linear rbps=174019176 rseqiops=41708 rrandiops=370 wbps=178075866 wseqiops=42705 wrandiops=378\n", true},
		{"calibrated", "8:0 ctrl=user model=linear rbps=104857600 rseqiops=25600 rrandiops=2000 wbps=104857600 wseqiops=25600 wrandiops=2000\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := hosttest.New(t)
			tr.UnifiedV2("8:0 enable=1 ctrl=auto rpct=0.00 rlat=250000 wpct=0.00 wlat=250000 min=1.00 max=10000.00\n")
			tr.Write("sys/fs/cgroup/io.cost.model", tc.model)
			tr.AddDisk(hosttest.Disk{Name: "sda", Dev: "8:0", Scheduler: hosttest.SchedNone, Sectors: 100})
			cs := Evaluate(Gather(context.Background(), Roots{Sys: tr.Sys, Proc: tr.Proc}, nil))
			c, ok := find(cs, "device.sda.iocost_model")
			if ok != tc.warn {
				t.Fatalf("iocost_model check present %v, want %v: %+v", ok, tc.warn, cs)
			}
			if ok && (c.Status != StatusWarn || c.Fix == "" || !strings.Contains(c.Fix, "ddiskqos calibrate /dev/sda")) {
				t.Errorf("check %+v: want a warning whose fix is ddiskqos calibrate /dev/sda", c)
			}
			if u, _ := find(cs, "device.usable"); !strings.HasPrefix(u.Value, "1 of 1 target devices") {
				t.Errorf("device.usable %q: the model check must not count as a device", u.Value)
			}
		})
	}
}

// TestTriageChecks: fails and warns about QoS first (fails before warns,
// Evaluate's order kept), then the limits' fails and warns, then info,
// then what is fine, the fine limits apart; a check of a new group lands
// by its status alone.
func TestTriageChecks(t *testing.T) {
	t.Parallel()
	cs := []Check{
		{ID: "cgroup.layout", Status: StatusOK},
		{ID: "cgroup.writeback", Status: StatusWarn},
		{ID: "device.vda.mechanism", Status: StatusWarn},
		{ID: "device.usable", Status: StatusFail},
		{ID: "latency.ebpf", Status: StatusWarn},
		{ID: "docker.rt_runtime", Status: StatusInfo},
		{ID: "limits.pty_max", Status: StatusWarn},
		{ID: "limits.threads_max", Status: StatusOK},
		{ID: "limits.nofile", Status: StatusFail},
		{ID: "limits.bridge_ports", Status: StatusOK},
		{ID: "psi.io", Status: StatusOK},
		{ID: "odd.one", Status: "maybe"},
	}
	ids := func(cs []Check) string {
		var s []string
		for _, c := range cs {
			s = append(s, c.ID)
		}
		return strings.Join(s, " ")
	}
	got := TriageChecks(cs)
	for _, tc := range []struct{ part, got, want string }{
		{"QoS", ids(got.QoS), "device.usable cgroup.writeback device.vda.mechanism latency.ebpf odd.one"},
		{"Scale", ids(got.Scale), "limits.nofile limits.pty_max"},
		{"Info", ids(got.Info), "docker.rt_runtime"},
		{"OK", ids(got.OK), "cgroup.layout psi.io"},
		{"ScaleOK", ids(got.ScaleOK), "limits.threads_max limits.bridge_ports"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %s, want %s", tc.part, tc.got, tc.want)
		}
	}
}
