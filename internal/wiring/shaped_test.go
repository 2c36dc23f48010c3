package wiring

import (
	"slices"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/host/hosttest"
)

// `ddiskqos check` (host.Shaped) and the daemon (HostDevices) must agree
// on which devices are shaped, or check's docker.data_root verdict lies.
func TestHostDevicesAgreesWithShaped(t *testing.T) {
	t.Parallel()
	tr := hosttest.Sample(t)
	roots := host.Roots{Sys: tr.Sys, Proc: tr.Proc}
	layout, err := host.Layout(roots)
	if err != nil {
		t.Fatal(err)
	}
	all, err := host.Devices(roots, layout)
	if err != nil {
		t.Fatal(err)
	}
	for _, globs := range [][]string{nil, {"sd*"}, {"vd*", "loop*"}, {"zram0", "loop1", "dm-?"}} {
		got, err := HostDevices(roots, layout, globs, nil)
		if err != nil {
			t.Fatal(err)
		}
		var daemon, check []string
		for _, d := range got.Actuated {
			daemon = append(daemon, d.Name)
		}
		for _, d := range all {
			if host.Shaped(d, globs) {
				check = append(check, d.Name)
			}
		}
		slices.Sort(daemon)
		slices.Sort(check)
		if !slices.Equal(daemon, check) {
			t.Errorf("globs %q: the daemon shapes %q, check says %q", globs, daemon, check)
		}
	}
}
