package main

import (
	"fmt"
	"io"

	"github.com/ddiskqos/ddiskqos/internal/bench/report"
	"github.com/ddiskqos/ddiskqos/internal/cli"
)

var benchCmd = cli.Group(cli.Info{
	Name:    "bench",
	Summary: "the paper's experiments in real containers; the daemon's cost at 1,000-10,000 cgroups; noisy neighbours against small readers",
	More:    "All need root and tear down everything they set up, also on Ctrl-C.",
})

// benchReport holds the flags bench paper and bench contention share: how
// long to run (--quick, --full, --trials) and where the report goes (--out,
// --json).
type benchReport struct {
	quick, full, json bool
	trials            int
	out               string
}

// declare adds the shared flags; quick and full say what the modes run,
// name is the report's file name (paper, contention), outNote what --out's
// help adds ("" for nothing).
func (r *benchReport) declare(f *cli.FlagSet, name, quick, full, outNote string) {
	f.BoolVar(&r.quick, "quick", quick)
	f.BoolVar(&r.full, "full", full)
	f.IntVar(&r.trials, "trials", 0, "N", "trials instead of the mode's")
	f.StringVar(&r.out, "out", "", "DIR", "write "+name+".md, "+name+".svg and "+name+".json into DIR"+outNote, cli.Dirs)
	f.BoolVar(&r.json, "json", "print the JSON report on stdout instead of Markdown")
}

// mode returns "quick", "default" or "full" (both benchmarks' Mode
// values), or the usage error.
func (r *benchReport) mode() (string, error) {
	switch {
	case r.quick && r.full:
		return "", fmt.Errorf("--quick and --full exclude each other")
	case r.trials < 0:
		return "", fmt.Errorf("--trials %d: want at least 1", r.trials)
	case r.quick:
		return "quick", nil
	case r.full:
		return "full", nil
	}
	return "default", nil
}

// emit writes the report as --out and --json say (report.Output.Emit);
// it returns the exit status.
func (r *benchReport) emit(stdout, stderr io.Writer, name string, rep any, markdown func(w io.Writer, plot string), svg func(io.Writer)) int {
	if err := (report.Output{Dir: r.out, JSON: r.json}).Emit(stdout, stderr, name, rep, markdown, svg); err != nil {
		fmt.Fprintf(stderr, "ddiskqos bench %s: %v\n", name, err)
		return 1
	}
	return 0
}
