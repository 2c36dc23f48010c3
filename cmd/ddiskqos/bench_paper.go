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
	"time"

	"github.com/moby/moby/client"

	"github.com/ddiskqos/ddiskqos/internal/bench/paper"
	"github.com/ddiskqos/ddiskqos/internal/bytesize"
	"github.com/ddiskqos/ddiskqos/internal/host"
)

const benchPaperHelp = `Usage: ddiskqos bench paper [--quick|--full] [--out DIR] [--json] [--trials N] [--size SIZE]

Run the dDiskQoS paper's experiments (Tables 3 and 5) in real Docker
containers on a loop-device ext4 volume, comparing ddiskqos with the
device's default scheduler (original), BFQ with equal weights (bfq), BFQ
with weights set by hand (static) and ddiskqos with the paper's settings
(paper), interleaved trial by trial, against the small readers alone (idle)
and the bulk reader alone (solo). Needs root, the Docker engine, losetup
(util-linux) and mkfs.ext4 (e2fsprogs). Everything it sets up — volume,
loop device, containers, image, weights — is removed at the end, also on
Ctrl-C.

Flags:
  --quick        one short trial (about 3 minutes): proves the harness
  --full         5 trials, 5 reads per size, and 1000 MiB files
                 (default: 3 trials, 3 reads per size, 1/10/100 MiB)
  --trials N     trials instead of the mode's
  --size SIZE    size of the loop volume (default: what the files need)
  --out DIR      write paper.md, paper.svg and paper.json into DIR
  --json         print the JSON report on stdout instead of Markdown
  -h, --help     show this help

Progress goes to stderr. Exit status: 0 done, 1 failure, 2 usage error.
`

// runBenchPaper is "ddiskqos bench paper".
func runBenchPaper(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ddiskqos bench paper", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	quick := fs.Bool("quick", false, "")
	full := fs.Bool("full", false, "")
	out := fs.String("out", "", "")
	asJSON := fs.Bool("json", false, "")
	trials := fs.Int("trials", 0, "")
	size := fs.String("size", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, benchPaperHelp)
			return 0
		}
		return benchUsage(stderr, strings.Replace(err.Error(), "-", "--", 1))
	}
	if fs.NArg() > 0 {
		return benchUsage(stderr, fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	}
	if *quick && *full {
		return benchUsage(stderr, "--quick and --full exclude each other")
	}
	if *trials < 0 {
		return benchUsage(stderr, fmt.Sprintf("--trials %d: want at least 1", *trials))
	}
	mode := paper.ModeDefault
	if *quick {
		mode = paper.ModeQuick
	} else if *full {
		mode = paper.ModeFull
	}
	plan, err := paper.PlanFor(mode, *trials)
	if err != nil {
		return benchUsage(stderr, err.Error())
	}
	var volSize int64
	if *size != "" {
		if volSize, err = bytesize.Parse(*size); err != nil || volSize <= 0 {
			return benchUsage(stderr, fmt.Sprintf("--size %q: want a size such as 4GiB", *size))
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cli, err := client.New(client.FromEnv)
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench paper: docker client: %v\n", err)
		return 1
	}
	defer cli.Close()
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	_, err = cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true})
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
	if *out != "" {
		if err := writeBenchFiles(*out, res, sum, report); err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench paper: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "bench paper: wrote %s\n", filepath.Join(*out, "paper.{md,svg,json}"))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			fmt.Fprintf(stderr, "ddiskqos bench paper: %v\n", err)
			return 1
		}
		return 0
	}
	plot := ""
	if *out != "" {
		plot = "paper.svg"
	}
	paper.WriteMarkdown(stdout, res, sum, plot)
	return 0
}

func writeBenchFiles(dir string, res *paper.Result, sum paper.Summary, report any) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var md, svg strings.Builder
	paper.WriteMarkdown(&md, res, sum, "paper.svg")
	paper.WriteSVG(&svg, res, sum)
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	for name, data := range map[string][]byte{"paper.md": []byte(md.String()), "paper.svg": []byte(svg.String()), "paper.json": append(js, '\n')} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func benchUsage(stderr io.Writer, msg string) int {
	fmt.Fprintf(stderr, "ddiskqos bench paper: %s\nRun 'ddiskqos bench paper --help' for usage.\n", msg)
	return 2
}
