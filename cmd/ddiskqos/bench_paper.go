package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/app"
	"github.com/ddiskqos/ddiskqos/internal/bench/paper"
	"github.com/ddiskqos/ddiskqos/internal/bytesize"
	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

// benchPaperOptions are the flags of "ddiskqos bench paper".
type benchPaperOptions struct {
	benchReport
	size string
}

var benchPaperCmd = &cli.Cmd[benchPaperOptions]{
	Info: paper.Info,
	Flags: func(o *benchPaperOptions, f *cli.FlagSet) {
		o.declare(f, "paper", "one short trial (about 3 minutes): proves the harness",
			"5 trials, 5 reads per size, and 1000 MiB files", "")
		f.StringVar(&o.size, "size", "", "SIZE", "size of the loop volume (default: what the files need)")
	},
}

// runBenchPaper is "ddiskqos bench paper".
func runBenchPaper(args []string, stdout, stderr io.Writer) int {
	o, _, code, ok := benchPaperCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	usage := func(msg string) int { return cli.Usagef(stderr, "ddiskqos bench paper", "%s", msg) }
	mode, err := o.mode()
	if err != nil {
		return usage(err.Error())
	}
	plan, err := paper.PlanFor(paper.Mode(mode), o.trials)
	if err != nil {
		return usage(err.Error())
	}
	var volSize int64
	if o.size != "" {
		if volSize, err = bytesize.Parse(o.size); err != nil || volSize <= 0 {
			return usage(fmt.Sprintf("--size %q: want a size such as 4GiB", o.size))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cli, err := app.DockerClient("") // the daemon's and the bench's one client
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench paper: docker client: %v\n", err)
		return 1
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Ping(pctx, client.PingOptions{})
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench paper: the Docker engine at %s does not answer: %v\n", cli.DaemonHost(), err)
		return 1
	}
	exe, _ := os.Executable()
	cmdline := "ddiskqos bench paper " + strings.Join(args, " ")
	res, err := paper.Run(ctx, paper.Options{Plan: plan, VolumeSize: volSize, Exe: exe, Docker: cli,
		Roots: host.Roots{Sys: "/sys", Proc: "/proc"}, Progress: stderr, Command: strings.TrimSpace(cmdline)})
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench paper: %v\n", err)
		return 1
	}
	sum := paper.Summarize(res)
	report := struct {
		*paper.Result
		Summary paper.Summary `json:"summary"`
	}{res, sum}
	return o.emit(stdout, stderr, "paper", report,
		func(w io.Writer, plot string) { paper.WriteMarkdown(w, res, sum, plot) },
		func(w io.Writer) { paper.WriteSVG(w, res, sum) })
}
