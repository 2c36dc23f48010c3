package iolat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrivileged: without CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN, in
// the effective set the sensor is unavailable for want of privilege before
// any bpf(2) call (the systemd unit's filter has none); an unreadable or
// odd status leaves the verdict to the kernel.
func TestPrivileged(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		capEff string
		ok     bool
	}{
		{"0000000000000000", false},
		{"0000000000200000", true},  // CAP_SYS_ADMIN
		{"000000c000000000", true},  // CAP_BPF, CAP_PERFMON
		{"0000008000000000", false}, // CAP_BPF alone
		{"000001ffffffffff", true},  // root
		{"zz", true},                // unparsable: the kernel says
	} {
		proc := t.TempDir()
		if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
			t.Fatal(err)
		}
		status := "Name:\tddiskqos\nCapInh:\t0000000000000000\nCapEff:\t" + c.capEff + "\nCapBnd:\t000001ffffffffff\n"
		if err := os.WriteFile(filepath.Join(proc, "self", "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
		err := privileged(proc)
		var ue *UnavailableError
		switch {
		case c.ok && err != nil:
			t.Errorf("CapEff %s: %v, want allowed", c.capEff, err)
		case !c.ok && (!errors.As(err, &ue) || ue.Why != WhyNoPrivilege || !strings.Contains(ue.Fix, "CAP_BPF")):
			t.Errorf("CapEff %s: %v, want unavailable for want of privilege", c.capEff, err)
		}
		if !c.ok {
			if _, err := Open(Options{ProcRoot: proc, SysRoot: t.TempDir()}); !errors.As(err, &ue) || ue.Why != WhyNoPrivilege {
				t.Errorf("Open with CapEff %s: %v, want no privilege", c.capEff, err)
			}
		}
	}
	if err := privileged(t.TempDir()); err != nil {
		t.Errorf("no status file: %v, want nil (the kernel decides)", err)
	}
}
