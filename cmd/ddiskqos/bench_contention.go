package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/ddiskqos/ddiskqos/internal/bench/contention"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

const benchContentionHelp = `Usage: ddiskqos bench contention [--quick|--full] [--trials N] [--neighbours LIST]
                                 [--configs LIST] [--out DIR] [--json] [--dir DIR]

First prove that a noisy neighbour makes small reads slow, then measure what
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
and states which of the issue's bars are met and which are missed.

Rig: a loop device with direct I/O over a file in --dir, ext4 on it; v1
blkio cgroups under /sys/fs/cgroup/blkio/ddiskqos-bench-contention-<pid>;
every workload is this binary's "workload" command. Needs root and cgroup
v1 blkio, losetup (util-linux) and mkfs.ext4 (e2fsprogs). Every process,
cgroup and the loop device are removed and the scheduler restored at the
end, also on failure or Ctrl-C.

Flags:
  --quick        1 trial, 2 neighbours (seqread, randread), short phases:
                 proves the harness in under 3 minutes
  --full         5 trials, every neighbour, 10 s web victim, 3 cold reads
                 per size: the committed report (about 40 minutes)
                 (default: 3 trials, every neighbour, 5 s web victim,
                 2 cold reads per size: about 16 minutes)
  --trials N     trials instead of the mode's
  --neighbours LIST
                 comma-separated neighbours instead of the mode's, e.g.
                 seqread,bufwrite
  --configs LIST comma-separated configurations instead of all; idle,
                 idle-bfq and original always run (every ratio is against
                 them), e.g.
                 --configs ddiskqos for a quick loop while tuning
  --out DIR      write contention.md, contention.svg and contention.json
  --json         print the JSON report on stdout instead of Markdown
  --dir DIR      where the loop device's backing file goes (a real disk,
                 not tmpfs; default /var/tmp)
  -h, --help     show this help

Examples:
  # Regenerate the committed report.
  ddiskqos bench contention --full --out docs/bench

  # Tune the daemon against one neighbour: 3 short trials, ~1 minute.
  ddiskqos bench contention --quick --trials 3 --neighbours seqread --configs ddiskqos

Progress goes to stderr. Exit status: 0 done, 1 failure, 2 usage error.
`

// runBenchContention is "ddiskqos bench contention".
func runBenchContention(args []string, stdout, stderr io.Writer) int {
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "ddiskqos bench contention: %s\nRun 'ddiskqos bench contention --help' for usage.\n", msg)
		return 2
	}
	fs := flag.NewFlagSet("ddiskqos bench contention", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	quick := fs.Bool("quick", false, "")
	full := fs.Bool("full", false, "")
	out := fs.String("out", "", "")
	asJSON := fs.Bool("json", false, "")
	trials := fs.Int("trials", 0, "")
	dir := fs.String("dir", "", "")
	nbs := fs.String("neighbours", "", "")
	cfgs := fs.String("configs", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, benchContentionHelp)
			return 0
		}
		return usage(strings.Replace(err.Error(), "-", "--", 1))
	}
	if fs.NArg() > 0 {
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if *quick && *full {
		return usage("--quick and --full exclude each other")
	}
	if *trials < 0 {
		return usage(fmt.Sprintf("--trials %d: want at least 1", *trials))
	}
	mode := contention.ModeDefault
	if *quick {
		mode = contention.ModeQuick
	} else if *full {
		mode = contention.ModeFull
	}
	plan, err := contention.PlanFor(mode, *trials)
	if err != nil {
		return usage(err.Error())
	}
	list := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	if err := plan.Select(list(*nbs), list(*cfgs)); err != nil {
		return usage(err.Error())
	}
	o := contention.Options{Plan: plan, Roots: host.Roots{Sys: "/sys", Proc: "/proc"}, Dir: *dir, Progress: stderr,
		Command: strings.TrimSpace("ddiskqos bench contention " + strings.Join(args, " "))}
	if os.Getenv(workload.EnvMain) == "" {
		exe, err := os.Executable()
		if err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
			return 1
		}
		o.Exe, o.ExeArgs = exe, []string{"workload"}
	} else {
		// A test binary that runs workload.Main when re-executed with
		// DDISKQOS_WORKLOAD_MAIN=1 (workload.MaybeRunFromEnv).
		o.Exe = os.Args[0]
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	res, err := contention.Run(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
		return 1
	}
	sum := contention.Summarize(res)
	report := struct {
		*contention.Result
		Summary contention.Summary `json:"summary"`
	}{res, sum}
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
		return 1
	}
	js = append(js, '\n')
	if *out != "" {
		var md, svg strings.Builder
		contention.WriteMarkdown(&md, res, sum, "contention.svg")
		contention.WriteSVG(&svg, res, sum)
		if err := os.MkdirAll(*out, 0o755); err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
			return 1
		}
		for _, f := range []struct {
			name string
			data []byte
		}{{"contention.md", []byte(md.String())}, {"contention.svg", []byte(svg.String())}, {"contention.json", js}} {
			if err := os.WriteFile(filepath.Join(*out, f.name), f.data, 0o644); err != nil {
				fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
				return 1
			}
		}
		fmt.Fprintf(stderr, "bench contention: wrote %s\n", filepath.Join(*out, "contention.{md,svg,json}"))
	}
	if *asJSON {
		if _, err := stdout.Write(js); err != nil {
			return 1
		}
		return 0
	}
	plot := ""
	if *out != "" {
		plot = "contention.svg"
	}
	contention.WriteMarkdown(stdout, res, sum, plot)
	return 0
}
