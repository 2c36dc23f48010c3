package vmrig

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// FindBurstDisk is the guest's side of the burst disk: its name under
// sysBlock (/sys/block: the disk whose serial is BurstSerial) and the
// throttling qemu applies to it, parsed from env (BurstEnv's value,
// BurstDisk.String's form).
func FindBurstDisk(env, sysBlock string) (string, BurstDisk, error) {
	var b BurstDisk
	if env == "" {
		return "", b, fmt.Errorf("%s is not set: no burst disk attached", BurstEnv)
	}
	if _, err := fmt.Sscanf(env, "throttling.iops-total=%d,throttling.iops-total-max=%d,throttling.iops-total-max-length=%d",
		&b.IOPS, &b.IOPSMax, &b.MaxLength); err != nil {
		return "", b, fmt.Errorf("%s=%q: %w", BurstEnv, env, err)
	}
	serials, _ := filepath.Glob(filepath.Join(sysBlock, "*", "serial"))
	for _, p := range serials {
		if s, _ := os.ReadFile(p); strings.TrimSpace(string(s)) == BurstSerial {
			return filepath.Base(filepath.Dir(p)), b, nil
		}
	}
	return "", b, fmt.Errorf("no disk with serial %s under %s (serials: %v)", BurstSerial, sysBlock, serials)
}
