package calibrate

import "github.com/ddiskqos/ddiskqos/internal/cli"

// Info is the help of `ddiskqos calibrate`: what it does, how and
// to what end, next to the code that does it. Its flags are declared
// where the command is wired (cmd/ddiskqos).
var Info = cli.Info{
	Name: "calibrate", Args: "DEVICE", ArgsComplete: cli.Devices,
	Summary: "measure a disk, write iocost's model and latency targets for it (--restore undoes)",
	Description: `Measures what a whole disk can do, with O_DIRECT requests of ddiskqos's own
load generator — sequential reads and writes of large blocks (bytes/s), 4 KiB
sequential and random reads and writes at queue depth 64 (IOPS and the
latency at saturation), and 4 KiB random requests one at a time (the
unloaded latency) — and writes iocost's io.cost.model for it (the linear
model, derived as the kernel's tools/cgroup/iocost_coef_gen.py does) and an
io.cost.qos (enable=1; p95 latency targets of 3x the unloaded p90, at most
the saturated p99; vrate between 50% and 100% of the model). iocost shares a
disk by weight only while its model says the disk is saturated: with the
kernel's default model (a whole device class) weights barely show.

THE WRITE PATTERNS OVERWRITE THE DEVICE'S DATA. A device that is mounted,
held (device-mapper, md), has partitions or is opened exclusively is
refused unless --force. The values replaced are saved under --state-dir and
written back by --restore. During the run the device's scheduler is none,
merges are off and iocost is off for it; all three are put back.`,
	Examples: `  ddiskqos calibrate --dry-run /dev/nvme1n1
  ddiskqos calibrate --duration 30s /dev/sdb
  ddiskqos calibrate --restore /dev/sdb`,
	Exit: "0 done, 1 failure (nothing written), 2 usage error.",
}
