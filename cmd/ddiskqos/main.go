// Command ddiskqos gives every container on a host disk-I/O quality of
// service: small, interactive I/O stays fast while bulk containers stream.
//
// This file only lists the subcommands; each lives in its own file and
// declares its flags once with internal/cli, from which its --help, the
// shell completion ("ddiskqos completion bash|zsh") and the man page
// ("ddiskqos man", docs/ddiskqos.1) are generated.
package main

import (
	"io"
	"os"

	"github.com/ddiskqos/ddiskqos/internal/buildinfo"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/workload"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// program is ddiskqos: every subcommand, for dispatch, help, completion
// and the man page. A new subcommand adds one line here (see internal/cli).
func program() *cli.Program {
	return &cli.Program{
		Summary: "automatic disk-I/O QoS for the containers of one host",
		Description: `Start with "ddiskqos check" to see whether QoS can work on this host, then
"ddiskqos run" (Docker host, defaults) or
"ddiskqos run --source cgroup --cgroup-layout lxc" (LXC), "--cgroup-parent /system.slice" (systemd).`,
		Version: func() string { return buildinfo.Read().String() },
		Commands: []cli.Command{
			{Spec: runCmd, Run: cli.NoStdin(runDaemon)},
			{Spec: statusCmd, Run: cli.NoStdin(runStatus)},
			{Spec: statsCmd, Run: cli.NoStdin(runStats)},
			{Spec: topCmd, Run: cli.NoStdin(runTop)},
			{Spec: checkCmd, Run: cli.NoStdin(runCheck)},
			{Spec: calibrateCmd, Run: cli.NoStdin(runCalibrate)},
			{Spec: benchCmd, Sub: []cli.Command{
				{Spec: benchPaperCmd, Run: cli.NoStdin(runBenchPaper)},
				{Spec: benchScaleCmd, Run: cli.NoStdin(runBenchScale)},
				{Spec: benchContentionCmd, Run: cli.NoStdin(runBenchContention)},
			}},
			{Spec: workload.Command, Run: workload.Main},
		},
	}
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return program().Run(args, stdin, stdout, stderr)
}
