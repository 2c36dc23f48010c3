package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// TestCalibrateBadInput: each bad input gets an error naming it, and
// nothing is measured or written.
func TestCalibrateBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{}, 2, "want one DEVICE"},
		{[]string{"--duration", "1ms", "sdb"}, 2, "--duration 1ms"},
		{[]string{"--state-dir", "rel", "sdb"}, 2, `--state-dir "rel"`},
		{[]string{"/dev/ddiskqos-no-such-disk"}, 1, `"/dev/ddiskqos-no-such-disk": no such block device`},
		{[]string{"ddiskqos-no-such-disk"}, 1, `"ddiskqos-no-such-disk": no such block device`},
	} {
		var out, errb bytes.Buffer
		code := runCalibrate(tc.args, &out, &errb)
		if code != tc.code || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("calibrate %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errb.String(), tc.code, tc.want)
		}
		if out.Len() != 0 {
			t.Errorf("calibrate %q printed %q", tc.args, out.String())
		}
	}
}

// TestRealCalibrateRefusesV1 runs calibrate against a real loop device on
// this host, whose io controller is on cgroup v1: iocost does not exist
// there, and the error says so before anything is measured.
func TestRealCalibrateRefusesV1(t *testing.T) {
	if testkit.InVM() {
		t.Skip("the VM is cgroup v2 only; this test is about a v1 host")
	}
	testkit.NeedRoot(t)
	l := testkit.LoopDevice(t, 16)
	var out, errb bytes.Buffer
	code := runCalibrate([]string{"--dry-run", l.Path}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), l.Path) || !strings.Contains(errb.String(), "iocost exists only on cgroup v2") {
		t.Errorf("exit %d, stderr %q: want exit 1 naming %s and cgroup v2", code, errb.String(), l.Path)
	}
}
