package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/view"
	"github.com/ddiskqos/ddiskqos/internal/view/tui"
)

// topOptions are the flags of "ddiskqos top".
type topOptions struct {
	daemonFlags
	sort    string
	refresh time.Duration
}

var topCmd = &cli.Cmd[topOptions]{
	Info: cli.Info{
		Name:    "top",
		Summary: "the same as status, live: rates, level changes, health",
		Description: `A live view of the running daemon ("ddiskqos run"), redrawn as it ticks:
whether it is healthy (a DEGRADED line for each reason it is not), the
workloads per level, the disks (mechanism, the best level doing I/O there,
the caps in force), the workloads in the order chosen, and the level
changes as they happen (seen between successive answers: new, demoted,
promoted, exempted, gone; levels passed within one --refresh show as one
step, L1 → L3), newest first. The columns are those of "ddiskqos status",
with the capacity the throttle estimates per disk; on a narrow terminal
the less needed columns go first.`,
		More: view.TopKeys,
		Examples: `  ddiskqos top
  ddiskqos top --sort level --refresh 500ms
  ddiskqos top --addr 10.0.0.5:9191    # a daemon listening beyond loopback`,
		Exit: `  0  quit
  1  the daemon is not reachable at start, or the terminal cannot be used
  2  usage error`,
	},
	Flags: func(o *topOptions, f *cli.FlagSet) {
		o.declare(f, "give up on one answer of the daemon after this long")
		f.DurationVar(&o.refresh, "refresh", time.Second, "DUR", "ask the daemon for its state this often")
		f.StringVar(&o.sort, "sort", "rate", "rate|level|name", "first order of the workloads: rate, level or name (keys r, l, n change it)")
	},
}

// runTop is `ddiskqos top`.
func runTop(args []string, stdout, stderr io.Writer) int {
	o, _, code, ok := topCmd.Parse(args, stdout, stderr)
	if !ok {
		return code
	}
	bad := func(format string, a ...any) int { return cli.Usagef(stderr, "ddiskqos top", format, a...) }
	if !slices.Contains(view.Sorts, o.sort) {
		return bad("--sort %q: want one of %s", o.sort, strings.Join(view.Sorts, ", "))
	}
	if o.refresh < 50*time.Millisecond {
		return bad("--refresh %s: want at least 50ms", o.refresh)
	}
	client, err := o.client()
	if err != nil {
		return bad("%v", err)
	}
	fetch := func() (*snapshot.Snapshot, error) {
		ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
		defer cancel()
		return client.Workloads(ctx, nil)
	}
	// The first answer before the screen is taken: a wrong --addr is an
	// error on the plain terminal, as with status.
	first, err := fetch()
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos top: %v\n", view.Explain(err, o.addr))
		return 1
	}
	m := view.NewTop(o.addr, o.sort)
	m.Observe(first)

	scr, err := tcell.NewScreen()
	if err == nil {
		err = scr.Init()
	}
	if err != nil {
		fmt.Fprintf(stderr, "ddiskqos top: cannot use the terminal (TERM=%q): %v\nddiskqos status prints the same once\n", os.Getenv("TERM"), err)
		return 1
	}
	// Fini leaves the alternate screen and restores the terminal's modes,
	// also when the loop panics.
	defer scr.Fini()
	return tui.Loop(scr, m, fetch, o.refresh)
}
