package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/ddiskqos/ddiskqos/internal/cli"
	"github.com/ddiskqos/ddiskqos/internal/snapshot"
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
		More: `Keys:
  r  sort by rate (most I/O first)     l  by level (best served first)
  n  by name                           q  (or Ctrl-C) quit`,
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
	if !slices.Contains(statusSorts, o.sort) {
		return bad("--sort %q: want one of %s", o.sort, strings.Join(statusSorts, ", "))
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
		fmt.Fprintf(stderr, "ddiskqos top: %v\n", statusExplain(err, o.addr))
		return 1
	}
	m := newTopModel(o.addr, o.sort)
	m.observe(first)

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
	return topLoop(scr, m, fetch, o.refresh)
}

// topFetched is one answer of the daemon.
type topFetched struct {
	snap *snapshot.Snapshot
	err  error
	at   time.Time
}

// topLoop draws m on scr and redraws it on every answer of the daemon
// (asked every refresh), every resize and every key, until q, Ctrl-C,
// SIGINT or SIGTERM.
func topLoop(scr tcell.Screen, m *topModel, fetch func() (*snapshot.Snapshot, error), refresh time.Duration) int {
	scr.HideCursor()
	stop := make(chan struct{})
	defer close(stop)
	fetched := make(chan topFetched, 1)
	go func() {
		t := time.NewTicker(refresh)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			s, err := fetch()
			select {
			case fetched <- topFetched{s, err, time.Now()}:
			case <-stop:
				return
			}
		}
	}()
	// In raw mode Ctrl-C is a key; a signal from elsewhere (kill) also
	// restores the terminal.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	events := make(chan tcell.Event, 16)
	go scr.ChannelEvents(events, stop)

	draw := func() {
		w, h := scr.Size()
		topDraw(scr, m.render(w, h, time.Now()))
	}
	draw()
	// The age in the title moves even between answers.
	clock := time.NewTicker(100 * time.Millisecond)
	defer clock.Stop()
	for {
		select {
		case ev := <-events:
			switch ev := ev.(type) {
			case *tcell.EventResize:
				scr.Sync()
			case *tcell.EventKey:
				if ev.Key() == tcell.KeyCtrlC || ev.Key() == tcell.KeyEscape {
					return 0
				}
				if ev.Key() == tcell.KeyRune && m.key(ev.Rune()) {
					return 0
				}
			}
		case f := <-fetched:
			if f.err != nil {
				m.fetchFailed(f.err, f.at)
			} else {
				m.observe(f.snap)
			}
		case <-clock.C:
		case <-sigs:
			return 0
		}
		draw()
	}
}

// topDraw puts lines on the screen, each cleared to its end.
func topDraw(scr tcell.Screen, lines []topLine) {
	scr.Clear()
	base := tcell.StyleDefault
	for y, l := range lines {
		st := base
		switch l.Style {
		case topTitle:
			st = base.Reverse(true)
		case topHeading:
			st = base.Bold(true)
		case topAlert:
			st = base.Foreground(tcell.ColorRed).Bold(true)
		case topDim:
			st = base.Dim(true)
		}
		scr.PutStrStyled(0, y, l.Text, st)
	}
	scr.Show()
}
