package vmrig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFindBurstDisk(t *testing.T) {
	t.Parallel()
	sys := t.TempDir()
	for name, serial := range map[string]string{"vda": "ddiskqos-disk", "vdb": BurstSerial + "\n"} {
		if err := os.MkdirAll(filepath.Join(sys, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, name, "serial"), []byte(serial), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	name, b, err := FindBurstDisk(DefaultBurst.String(), sys)
	if err != nil || name != "vdb" || b.IOPS != DefaultBurst.IOPS || b.IOPSMax != DefaultBurst.IOPSMax || b.MaxLength != DefaultBurst.MaxLength {
		t.Fatalf("FindBurstDisk = %q %+v %v, want vdb %+v", name, b, err, DefaultBurst)
	}
	for _, tc := range []struct{ env, sys, want string }{
		{"", sys, BurstEnv + " is not set"},
		{"throttling.iops-total=x", sys, BurstEnv + `="throttling.iops-total=x"`},
		{DefaultBurst.String(), t.TempDir(), "no disk with serial " + BurstSerial},
	} {
		if _, _, err := FindBurstDisk(tc.env, tc.sys); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("FindBurstDisk(%q): err %v, want one with %q", tc.env, err, tc.want)
		}
	}
}
