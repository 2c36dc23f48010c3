package actuate

import (
	"strings"
	"testing"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/mech"
	"github.com/ddiskqos/ddiskqos/internal/throttle"
)

// TestApplyReportsDevices: Apply says per device what is in force — its
// mechanisms, whether a throttle caps there — and Hold works on the device
// that has one, by device, and says why it cannot on the other.
func TestApplyReportsDevices(t *testing.T) {
	t.Parallel()
	h, _ := fakeBFQ(t, "default 100\n")
	weight := Device{Name: "loop0", Dev: cgroupfs.Dev{Major: 7}, Mech: mech.BFQWeight}
	both := Device{Name: "loop1", Dev: cgroupfs.Dev{Major: 7, Minor: 1}, Mech: mech.BFQWeight, Also: []mech.Name{mech.Throttle}}
	a, err := New(Config{Hierarchy: h, DryRun: true, Devices: []Device{weight, both}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.RestoreAll() })
	st, err := a.Apply(time.Unix(1, 0), []Target{{ID: "c", Cgroup: "/c", Level: 3, Weight: 250}})
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 2 || st[0].Capping || !st[1].Capping || st[1].Device.Mechanisms() != "bfq-weight+throttle" ||
		st[0].Device.Mechanisms() != "bfq-weight" || !st[1].Device.Weighted() {
		t.Fatalf("device status %+v", st)
	}
	if err := a.Hold(both.Dev, throttle.Ceiling{From: 3, IOPS: 10}); err != nil {
		t.Errorf("Hold on the throttled device: %v", err)
	}
	if err := a.Hold(weight.Dev, throttle.Ceiling{}); err == nil || !strings.Contains(err.Error(), "no throttle") {
		t.Errorf("Hold on a weight-only device: %v, want why not", err)
	}
	if err := a.Hold(cgroupfs.Dev{Major: 9}, throttle.Ceiling{}); err == nil {
		t.Error("Hold on a device not actuated: no error")
	}
}

// TestNewRefusesMechanisms: a device whose mechanism the registry does not
// have, or cannot open on the hierarchy, or that is the Docker actuator's,
// is refused with its name; so is an adopted original of such a knob.
func TestNewRefusesMechanisms(t *testing.T) {
	t.Parallel()
	h := cgroupfs.Hierarchy{Version: 1, Mount: t.TempDir()}
	for _, c := range []struct {
		dev  Device
		want string
	}{
		{Device{Name: "sda", Mech: "nope"}, `no mechanism "nope"`},
		{Device{Name: "sda", Mech: mech.IOCostWeight}, "iocost-weight has no weight file on cgroup v1"},
		{Device{Name: "sda", Mech: mech.DockerWeight}, "Docker actuator"},
	} {
		if _, err := New(Config{Hierarchy: h, Devices: []Device{c.dev}}, nil); err == nil || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), "sda") {
			t.Errorf("%+v: %v, want an error naming sda and saying %q", c.dev, err, c.want)
		}
	}
	for _, o := range []Original{{Cgroup: "/a", Knob: "docker-blkio-weight", DevStr: "7:0"}, {Cgroup: "/a", Knob: "nope", DevStr: "7:0"},
		{Cgroup: "/a", Knob: "iocost", DevStr: "7:0"}} {
		if _, err := New(Config{Hierarchy: h}, []Original{o}); err == nil || !strings.Contains(err.Error(), "/a") {
			t.Errorf("adopted %+v: %v, want an error naming it", o, err)
		}
	}
}
