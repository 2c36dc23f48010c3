package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/workload"
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
// name is the report's file name (paper, contention).
func (r *benchReport) declare(f *cli.FlagSet, name, quick, full string) {
	f.BoolVar(&r.quick, "quick", quick)
	f.BoolVar(&r.full, "full", full)
	f.IntVar(&r.trials, "trials", 0, "N", "trials instead of the mode's")
	f.StringVar(&r.out, "out", "", "DIR", "write "+name+".md, "+name+".svg and "+name+".json into DIR", cli.Dirs)
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

// emit writes the report: name.md, name.svg and name.json into --out, then
// the JSON (--json) or the Markdown on stdout. markdown writes the report
// referring to plot ("" for none).
func (r *benchReport) emit(stdout, stderr io.Writer, name string, report any, markdown func(w io.Writer, plot string), svg func(io.Writer)) int {
	fail := func(err error) int {
		fmt.Fprintf(stderr, "ddiskqos bench %s: %v\n", name, err)
		return 1
	}
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return fail(err)
	}
	js = append(js, '\n')
	plot := ""
	if r.out != "" {
		plot = name + ".svg"
		var md, pic strings.Builder
		markdown(&md, plot)
		svg(&pic)
		if err := os.MkdirAll(r.out, 0o755); err != nil {
			return fail(err)
		}
		for _, f := range []struct {
			ext  string
			data []byte
		}{{"md", []byte(md.String())}, {"svg", []byte(pic.String())}, {"json", js}} {
			if err := os.WriteFile(filepath.Join(r.out, name+"."+f.ext), f.data, 0o644); err != nil {
				return fail(err)
			}
		}
		fmt.Fprintf(stderr, "bench %s: wrote %s\n", name, filepath.Join(r.out, name+".{md,svg,json}"))
	}
	if r.json {
		if _, err := stdout.Write(js); err != nil {
			return fail(err)
		}
		return 0
	}
	markdown(stdout, plot)
	return 0
}

// benchLoadExe returns the program and arguments that run the load
// generator: this binary's "workload" command, or, in a test binary that
// runs workload.Main when re-executed with DDISKQOS_WORKLOAD_MAIN=1
// (workload.MaybeRunFromEnv), the test binary itself.
func benchLoadExe() (string, []string, error) {
	if os.Getenv(workload.EnvMain) != "" {
		return os.Args[0], nil, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", nil, err
	}
	return exe, []string{"workload"}, nil
}

// benchCommit names the tree a report comes from: git rev-parse HEAD of
// the working directory's git tree, with "-dirty" when it has changes;
// outside one, the vcs revision Go stamped into the binary (with "-dirty"
// when modified); else "unknown".
func benchCommit() string {
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		c := strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain").Output(); err != nil || len(strings.TrimSpace(string(st))) > 0 {
			c += "-dirty"
		}
		return c
	}
	return buildCommit(debug.ReadBuildInfo())
}

// buildCommit is the vcs revision of a binary's build info.
func buildCommit(bi *debug.BuildInfo, ok bool) string {
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
