package main

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/ddiskqos/ddiskqos/internal/bench/contention"
	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/host"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

// benchContentionOptions are the flags of "ddiskqos bench contention".
type benchContentionOptions struct {
	benchReport
	dir, neighbours, configs string
	scenario, scheduler      string
	streamer, deviceClass    string
	summarize                string
	allowBusy, noLoop        bool
	warmup, victims          time.Duration
}

var benchContentionCmd = &cli.Cmd[benchContentionOptions]{
	Info: contention.Info,
	Flags: func(o *benchContentionOptions, f *cli.FlagSet) {
		o.declare(f, "contention", "1 trial, 2 neighbours (seqread, randread), short phases: proves the harness in under 3 minutes",
			"5 trials, every neighbour, 10 s web victim, 3 cold reads per size: the committed report (about 40 minutes)",
			" (contention-v2.* on cgroup v2); --scenario host writes only its JSON, contention-host[-CLASS][-STREAMER][-bfq][-v2].json, "+
				"and prints the run's report (Markdown) on stdout; --summarize DIR makes each JSON a section of the device matrix")
		f.StringVar(&o.neighbours, "neighbours", "", "LIST", "comma-separated neighbours instead of the mode's, e.g. seqread,bufwrite")
		f.StringVar(&o.configs, "configs", "", "LIST", "comma-separated configurations instead of all; idle, idle-bfq and original always run (every ratio is against them), e.g. --configs ddiskqos for a quick loop while tuning")
		f.StringVar(&o.dir, "dir", "/var/tmp", "DIR", "where the loop device's backing file goes (a real disk; tmpfs only for the host scenario with --device-class)", cli.Dirs)
		f.StringVar(&o.scenario, "scenario", "cell", "NAME", "cell (one neighbour against one victim at a time) or host (a streamer all along, the daemon from the start, a web reader and 8 light tenants, static-cap frontier)")
		f.StringVar(&o.scheduler, "scheduler", "default", "NAME", "host scenario: the scheduler of every cell, default (the device's) or bfq")
		f.StringVar(&o.streamer, "streamer", "greedy", "NAME", "host scenario: the neighbour all along, greedy (1 MiB O_DIRECT reads, 32 in flight, unpaced) or paced-<MB/s>-qd<N> (a backup-like reader: paced-50-qd1, paced-200-qd4); a paced one is judged by the no-harm bars")
		f.StringVar(&o.deviceClass, "device-class", "", "NAME", "host scenario: names the device class (what --dir sits on: vda-loop, tmpfs-loop, ...) in the report and its file name, contention-host-NAME[-STREAMER].json")
		f.StringVar(&o.summarize, "summarize", "", "DIR", "run nothing: read every host report in DIR (contention-host-*.json), judge each again by this binary's bars, and print the device matrix (Markdown: the summary, then each report in full) on stdout", cli.Dirs)
		f.BoolVar(&o.noLoop, "no-loop", "host scenario: no loop device: the files straight in a new directory under --dir, on the host's own disk as it is (its scheduler untouched; only the bench's own cgroups are capped)")
		f.BoolVar(&o.allowBusy, "allow-busy", "host scenario: run and write the report although the host is not quiet (load average above 1, or idle far above the unloaded device); the report says so")
		f.DurationVar(&o.warmup, "warmup", 0, "DUR", "the neighbour (streamer) alone before the victims, instead of the mode's")
		f.DurationVar(&o.victims, "victims", 0, "DUR", "how long the web victim (host: the web and light victims) runs, instead of the mode's; at least 1s")
	},
}

// runBenchContention is "ddiskqos bench contention".
func runBenchContention(args []string, stdout, stderr io.Writer) int {
	o, _, code, ok := benchContentionCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	usage := func(msg string) int { return cli.Usagef(stderr, "ddiskqos bench contention", "%s", msg) }
	if o.summarize != "" {
		if n := len(args); n > 2 || n == 2 && args[0] != "--summarize" {
			return usage("--summarize reads reports and runs nothing: give it alone")
		}
		es, err := contention.ReadMatrix(o.summarize)
		if err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench contention: --summarize: %v\n", err)
			return 1
		}
		contention.WriteMatrixMarkdown(stdout, es)
		return 0
	}
	mode, err := o.mode()
	if err != nil {
		return usage(err.Error())
	}
	switch contention.Scenario(o.scenario) {
	case contention.ScenarioHost:
		return runBenchContentionHost(o, contention.Mode(mode), args, stdout, stderr)
	case contention.ScenarioCell:
	default:
		return usage(fmt.Sprintf("--scenario %q: want cell or host", o.scenario))
	}
	switch {
	case o.scheduler != "default":
		return usage("--scheduler is for --scenario host (the cell scenario runs its own schedulers per configuration)")
	case o.allowBusy:
		return usage("--allow-busy is for --scenario host")
	case o.streamer != "greedy" || o.deviceClass != "" || o.noLoop:
		return usage("--streamer, --device-class and --no-loop are for --scenario host")
	case o.warmup < 0 || o.victims < 0 || (o.victims > 0 && o.victims < time.Second):
		return usage(fmt.Sprintf("--warmup %s, --victims %s: want a warm-up of at least 0s and victims of at least 1s", o.warmup, o.victims))
	}
	plan, err := contention.PlanFor(contention.Mode(mode), o.trials)
	if err != nil {
		return usage(err.Error())
	}
	list := func(s string) []string {
		if s == "" {
			return nil
		}
		return strings.Split(s, ",")
	}
	if err := plan.Select(list(o.neighbours), list(o.configs)); err != nil {
		return usage(err.Error())
	}
	if o.warmup > 0 {
		plan.Warmup = o.warmup
	}
	if o.victims > 0 {
		plan.Web = o.victims
	}
	c := contention.Options{Plan: plan, Roots: host.Roots{Sys: "/sys", Proc: "/proc"}, Dir: o.dir, Progress: stderr,
		Command: strings.TrimSpace("ddiskqos bench contention " + strings.Join(args, " "))}
	if c.Exe, c.ExeArgs, err = workload.Exe(); err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
		return 1
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	res, err := contention.Run(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
		return 1
	}
	res.Build = report.Binary()
	sum := contention.Summarize(res)
	rep := struct {
		*contention.Result
		Summary contention.Summary `json:"summary"`
	}{res, sum}
	name := "contention"
	if res.Cgroup == "v2" {
		name = "contention-v2"
	}
	return o.emit(stdout, stderr, name, rep,
		func(w io.Writer, plot string) { contention.WriteMarkdown(w, res, sum, plot) },
		func(w io.Writer) { contention.WriteSVG(w, res, sum) })
}

// runBenchContentionHost is "ddiskqos bench contention --scenario host".
func runBenchContentionHost(o *benchContentionOptions, mode contention.Mode, args []string, stdout, stderr io.Writer) int {
	usage := func(msg string) int { return cli.Usagef(stderr, "ddiskqos bench contention", "%s", msg) }
	if o.neighbours != "" {
		return usage("--neighbours is for --scenario cell (the host scenario's neighbour is the streamer, seqread)")
	}
	plan, err := contention.HostPlanFor(mode, o.trials)
	if err != nil {
		return usage(err.Error())
	}
	var configs []string
	if o.configs != "" {
		configs = strings.Split(o.configs, ",")
	}
	if err := plan.Select(configs); err != nil {
		return usage(err.Error())
	}
	if err := plan.SetScheduler(o.scheduler); err != nil {
		return usage("--scheduler: " + err.Error())
	}
	if err := plan.SetPhases(o.warmup, o.victims); err != nil {
		return usage(err.Error())
	}
	if err := plan.SetStreamer(o.streamer); err != nil {
		return usage("--streamer: " + err.Error())
	}
	if o.deviceClass != "" && !validClass(o.deviceClass) {
		return usage(fmt.Sprintf("--device-class %q: want letters, digits and dashes (it names the report's files)", o.deviceClass))
	}
	plan.Device = o.deviceClass
	if o.noLoop && plan.Scheduler != "" {
		return usage("--no-loop with --scheduler " + o.scheduler + ": the host's own disk keeps its scheduler")
	}
	plan.NoLoop = o.noLoop
	c := contention.HostOptions{Plan: plan, Roots: host.Roots{Sys: "/sys", Proc: "/proc"}, Dir: o.dir, Progress: stderr,
		Command: strings.TrimSpace("ddiskqos bench contention " + strings.Join(args, " ")), Build: report.Binary(), AllowBusy: o.allowBusy}
	if c.Exe, c.ExeArgs, err = workload.Exe(); err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	res, err := contention.RunHost(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench contention: %v\n", err)
		return 1
	}
	sum := contention.SummarizeHost(res)
	if len(sum.NotQuiet) > 0 && !o.allowBusy {
		fmt.Fprintf(stderr, "ddiskqos bench contention: the host was not quiet (%s): report not written; --allow-busy writes it anyway, marked as such\n",
			strings.Join(sum.NotQuiet, "; "))
		return 1
	}
	return emitHost(o, stdout, stderr, res, sum)
}

// emitHost writes a host scenario's report: only its JSON into --out
// (hostReportName(res).json; its Markdown is a section of
// docs/bench/matrix.md, which --summarize writes from the JSONs), and the
// cell's Markdown (no plot) or, with --json, the JSON on stdout.
func emitHost(o *benchContentionOptions, stdout, stderr io.Writer, res *contention.HostResult, sum contention.HostSummary) int {
	rep := struct {
		*contention.HostResult
		Summary contention.HostSummary `json:"summary"`
	}{res, sum}
	name := hostReportName(res)
	if err := (report.Output{Dir: o.out, JSON: o.json, JSONOnly: true}).Emit(stdout, stderr, name, rep,
		func(w io.Writer, plot string) { contention.WriteHostMarkdown(w, res, sum, plot) }, nil); err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench %s: %v\n", name, err)
		return 1
	}
	return 0
}

// hostReportName is a host report's file name without .json:
// contention-host[-CLASS][-STREAMER][-bfq][-v2].
func hostReportName(res *contention.HostResult) string {
	plan := res.Plan
	name := "contention-host"
	if plan.Device != "" {
		name += "-" + plan.Device
	}
	if plan.Streamer != "" {
		name += "-" + plan.Streamer
	}
	if plan.Scheduler == "bfq" {
		name += "-bfq"
	}
	if res.Cgroup == "v2" {
		name += "-v2"
	}
	return name
}

// validClass reports whether a device class name is safe in a file name.
func validClass(s string) bool {
	for _, r := range s {
		if !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != "" && len(s) <= 40
}
