package paper

import "github.com/ddiskqos/ddiskqos/internal/cli"

// Info is the help of `ddiskqos bench paper`: what it does, how and
// to what end, next to the code that does it. Its flags are declared
// where the command is wired (cmd/ddiskqos).
var Info = cli.Info{
	Parent: "bench", Name: "paper",
	Summary: "the dDiskQoS paper's experiments (Tables 3 and 5) in real Docker containers on a loop device of our own, comparing no QoS, BFQ, hand-set BFQ weights and ddiskqos; writes a Markdown report, a plot and every sample as JSON",
	Description: `Run the dDiskQoS paper's experiments (Tables 3 and 5) in real Docker
containers on a loop-device ext4 volume, comparing ddiskqos with the
device's default scheduler (original), BFQ with equal weights (bfq), BFQ
with weights set by hand (static) and ddiskqos with the paper's settings
(paper), interleaved trial by trial, against the small readers alone (idle)
and the bulk reader alone (solo). Needs root, the Docker engine, losetup
(util-linux) and mkfs.ext4 (e2fsprogs). Everything it sets up — volume,
loop device, containers, image, weights — is removed at the end, also on
Ctrl-C.

Without --quick or --full: 3 trials, 3 reads per size, 1/10/100 MiB files.
Progress goes to stderr.`,
	Examples: `  # Prove the harness in about 3 minutes.
  ddiskqos bench paper --quick
  # Regenerate the committed report.
  ddiskqos bench paper --full --out docs/bench`,
}
