package app

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/cgroupfs"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
	"github.com/ddiskqos/ddiskqos/internal/mech"
)

// HostDevices shapes what host.Shaped (`ddiskqos check`'s rule) says, counts
// every target device, says which selected device no mechanism reaches,
// and refuses a selection that leaves nothing to shape.
func TestHostDevices(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	roots := host.Roots{Sys: tr.Sys, Proc: tr.Proc}
	layout, err := host.Layout(roots)
	if err != nil {
		t.Fatal(err)
	}
	all, err := host.Devices(roots, layout, mech.Params{})
	if err != nil {
		t.Fatal(err)
	}
	var targets []cgroupfs.Dev
	for _, d := range all {
		if d.Target {
			dev, err := cgroupfs.ParseDev(d.Dev)
			if err != nil {
				t.Fatal(err)
			}
			targets = append(targets, dev)
		}
	}

	for _, globs := range [][]string{nil, {"sd*"}, {"vd*", "loop*"}, {"zram0", "loop1", "dm-?", "sd?"}} {
		var buf bytes.Buffer
		got, err := HostDevices(roots, layout, globs, mech.Params{}, slog.New(slog.NewTextHandler(&buf, nil)))
		if err != nil {
			t.Fatalf("globs %q: %v", globs, err)
		}
		var shaped, want []string
		for _, d := range got.Actuated {
			shaped = append(shaped, d.Name)
		}
		for _, d := range all {
			if host.Shaped(d, globs) {
				want = append(want, d.Name)
			}
			skipped := strings.Contains(buf.String(), "device="+d.Name+" ")
			if sel := host.Selected(d, globs) && !host.Shaped(d, globs); skipped != sel {
				t.Errorf("globs %q: %s selected without a mechanism %v, logged as skipped %v:\n%s", globs, d.Name, sel, skipped, buf.String())
			}
		}
		if !slices.Equal(shaped, want) {
			t.Errorf("globs %q: shaped %q, want %q", globs, shaped, want)
		}
		if !slices.Equal(got.Sense, targets) {
			t.Errorf("globs %q: counted %v, want every target device %v", globs, got.Sense, targets)
		}
	}

	for _, tc := range []struct {
		globs []string
		want  string
	}{
		{[]string{"nosuch*"}, "no block device to shape"},
		{[]string{"sd["}, `devices pattern "sd["`},
	} {
		if _, err := HostDevices(roots, layout, tc.globs, mech.Params{}, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("globs %q: err %v, want one saying %q", tc.globs, err, tc.want)
		}
	}

	// cgroup v2 without the io controller: no mechanism reaches vda, which
	// is said, and nothing is left to shape.
	tr = hosttest.New(t)
	tr.UnifiedV2("-")
	tr.Write("sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n")
	tr.AddDisk(hosttest.Disk{Name: "vda", Dev: "254:0", Scheduler: hosttest.SchedBFQ, Sectors: 100})
	roots = host.Roots{Sys: tr.Sys, Proc: tr.Proc}
	if layout, err = host.Layout(roots); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = HostDevices(roots, layout, []string{"vd*"}, mech.Params{}, slog.New(slog.NewTextHandler(&buf, nil)))
	if err == nil || !strings.Contains(err.Error(), "no block device to shape") {
		t.Errorf("v2 without io: err %v, want no block device to shape", err)
	}
	if !strings.Contains(buf.String(), "device skipped: no cgroup mechanism reaches it") || !strings.Contains(buf.String(), "device=vda ") {
		t.Errorf("v2 without io: vda's skip not logged:\n%s", buf.String())
	}
}
