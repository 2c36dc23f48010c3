package contention

import "github.com/ddiskqos/ddiskqos/internal/cli"

// Info is the help of `ddiskqos bench contention`: what it does, how and
// to what end, next to the code that does it. Its flags are declared
// where the command is wired (cmd/ddiskqos).
var Info = cli.Info{
	Parent: "bench", Name: "contention",
	Summary: "noisy neighbours (sequential and random readers, direct and buffered writers) against a web-like reader and cold file reads: proves the contention with no QoS, then measures BFQ, static weights, a fixed throttle and ddiskqos side by side; --scenario host: a streamer all along beside a web service and eight light tenants, ddiskqos against static caps",
	Description: `First prove that a noisy neighbour makes small reads slow, then measure what
each answer to it does, side by side in one run.

Each noisy neighbour runs alone in a cgroup of its own:
  seqread      sequential O_DIRECT reader, 1 MiB requests, 32 in flight
  randread     4k O_DIRECT random-read flood, 32 in flight
  directwrite  O_DIRECT writer, 1 MiB requests, 32 in flight
  bufwrite     buffered writer with fdatasync every 32 MiB (on cgroup v1 its
               writeback is not charged to its cgroup: the report says how
               much of it a cgroup can control)
After a warm-up, victims start, each in a new cgroup: a web-server-like
reader (4k random reads at 100 requests/s; p50, p99, p99.9 from an HDR
histogram), then cold reads of a 1 MiB and a 10 MiB file.

Configurations, interleaved within each trial:
  idle            the victims alone (the reference)
  idle-bfq        the victims alone on BFQ (the reference of bfq, static
                  and ddiskqos-bfq)
  original        the device's default scheduler, no QoS (the problem)
  bfq             BFQ, equal weights
  static          BFQ, weights 1000 (victims) / 100 (neighbour) by hand
  throttle-fixed  a fixed read/write bytes/s cap on the neighbour at 50 % of
                  its no-QoS throughput, as an operator would set it
  ddiskqos        the daemon with its defaults, default scheduler
  ddiskqos-bfq    the daemon with its defaults, on BFQ

The report gives, per neighbour and configuration, the victims' latency
÷ idle and the neighbour's throughput ÷ no QoS while the victims ran and in
each of the two seconds after they stopped (medians, min–max over trials),
and states which of its bars are met and which are missed.

Rig: a loop device with direct I/O over a file in --dir, ext4 on it;
cgroups under ddiskqos-bench-contention-<pid> in the host's I/O hierarchy:
v1 blkio, or cgroup v2 (io, and memory when offered, enabled for the run's
cgroups; static sets io.bfq.weight, throttle-fixed io.max; ddiskqos runs
with iocost enabled on the device, its model and latency targets
calibrated first with calibrate's patterns on a second loop device over a
512 MiB file in --dir; iocost is off in every other configuration). On v2
the report is named contention-v2.{md,svg,json}. Every workload is this
binary's "workload" command. Needs root, losetup (util-linux) and
mkfs.ext4 (e2fsprogs). Every process, cgroup and loop device is removed,
and the scheduler and iocost restored, at the end, also on failure or
Ctrl-C.

Without --quick or --full: 3 trials, every neighbour, 5 s web victim, 2
cold reads per size: about 16 minutes. Progress goes to stderr.

--scenario host measures a host as it lives instead: per trial
and configuration the streamer (seqread) starts first and runs all along
(with ddiskqos the daemon is up before it); after a warm-up (35 s) a
web-like reader (4k random reads at 100/s) and 8 light tenants (4k random
reads at 5/s each), each in a new cgroup, run for 65 s, with cold reads of
a 1 MiB and a 10 MiB file from new cgroups during that phase; the streamer
keeps running 4 s after. Configurations: idle, original, ddiskqos, and
static caps on the streamer (blkio.throttle.read_bps_device on v1, io.max
on v2) at 2, 5, 10, 25 and 50 % of its no-QoS throughput in the same trial
(--configs static-95 adds another): the frontier an operator could set
by hand, against which the report places ddiskqos's point; --configs
ddiskqos-4x adds the daemon with latency_target 4x, the point that
setting would give (the bars judge the defaults). --streamer
paced-<MB/s>-qd<N> replaces the greedy streamer by a backup-like reader
(paced-50-qd1, paced-200-qd4): a moderate neighbour, judged by the no-harm
bars (no QoS keeps the victims within 3x idle; with ddiskqos the streamer
keeps at least 90 % and the victims are no worse than without it).
--device-class NAME names what --dir sits on (vda-loop, tmpfs-loop, ...)
in the report, which also states that filesystem and its disk's
scheduler, rotational flag and queue depth. --no-loop measures the
host's own disk instead of a loop device: the files go straight into a
new directory under --dir, the disk under it is shared with the rest of
the host, its scheduler is never changed and only the bench's own
cgroups are capped (the class docs/bench/matrix.sh calls vda).
--summarize DIR runs nothing: it reads every host report in DIR, judges
each again by this binary's bars and prints the device matrix
(docs/bench/matrix.md): a table, per class and neighbour, of no QoS,
ddiskqos and the best peer of the same run and the bars missed, then
each report in full as a section of its own (## contention-host-...).
The light tenants start at spread phases of their period, as independent
containers do. All cells run the device's default scheduler, or BFQ with
--scheduler bfq. The report names the commit and states its bars, met or
missed; --out DIR gets only its JSON
(contention-host[-CLASS][-STREAMER].json; -bfq with BFQ; -v2 on cgroup
v2), no Markdown and no plot: the run's Markdown goes to stdout (the
JSON with --json), and into the matrix through --summarize. A host
scenario run refuses to start when the 1-minute load average is above 1,
and to write its report when idle's web p99 is above 10× the unloaded
device's p99 measured at its start (under --scheduler bfq the report
says so instead: BFQ's idling slows the victims with no streamer at
all); --allow-busy runs and writes anyway, marked as such. Without
--quick or --full: 3 trials, about 42 minutes; --full: 5 trials, about
69 minutes; --quick: 1 trial with shorter phases, about 5 minutes.`,
	Examples: `  # Regenerate the committed report.
  ddiskqos bench contention --full --out docs/bench

  # Tune the daemon against one neighbour: 3 short trials, ~1 minute.
  ddiskqos bench contention --quick --trials 3 --neighbours seqread \
      --configs ddiskqos

  # The host scenario on a quiet machine, 3 trials, ~42 minutes.
  ddiskqos bench contention --scenario host --out docs/bench`,
}
