// Command ddiskqos gives every container on a host disk-I/O quality of
// service: small, interactive I/O stays fast while bulk containers stream.
//
// This file only dispatches subcommands; each lives in its own file.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ddiskqos/ddiskqos/internal/workload"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

const usage = `ddiskqos — automatic disk-I/O QoS for the containers of one host.

Usage:
  ddiskqos run [flags]          the daemon: discover containers, move each
                                through four I/O priority levels as it uses
                                2, 8, 32, 128 MiB, apply the level as a
                                weight or cap on its cgroup, restore on exit
  ddiskqos status [--json]      what the running daemon decided, per workload
  ddiskqos top                  the same, live: rates, level changes, health
  ddiskqos stats CONTAINER|CGROUP...
                                what the kernel counts for each: CPU,
                                memory, I/O per disk, pids, network
  ddiskqos check [--json]       host preflight: cgroup layout, per-device
                                mechanism, PSI, Docker engine, scale limits
  ddiskqos calibrate DEVICE     measure a disk, write iocost's model and
                                latency targets for it (--restore undoes)
  ddiskqos bench paper|scale|contention
                                the paper's experiments in real containers;
                                the daemon's cost at 1,000-10,000 cgroups;
                                noisy neighbours against small readers
  ddiskqos workload [flags] OP PATH
                                the load generator the tests and benchmarks
                                run (also inside containers)
  ddiskqos help [COMMAND]       this text, or a command's own help

Start with "ddiskqos check" to see whether QoS can work on this host, then
"ddiskqos run" (Docker host, defaults) or
"ddiskqos run --source cgroup --cgroup-parent /lxc.payload" (LXC, systemd).
Run "ddiskqos COMMAND --help" for a command's flags.
Exit status: 0 ok, 1 failure, 2 usage error.
`

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runDaemon(rest, stdout, stderr)
	case "status":
		return runStatus(rest, stdout, stderr)
	case "stats":
		return runStats(rest, stdout, stderr)
	case "top":
		return runTop(rest, stdout, stderr)
	case "check":
		return runCheck(rest, stdout, stderr)
	case "workload":
		return workload.Main(rest, stdin, stdout, stderr)
	case "calibrate":
		return runCalibrate(rest, stdout, stderr)
	case "bench":
		return runBench(rest, stdout, stderr)
	case "help", "-h", "--help":
		if len(rest) > 0 {
			return run([]string{rest[0], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "ddiskqos: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
}
