// Package tui runs the model of `ddiskqos top` (view.Top) on a terminal
// with tcell: it asks the daemon every refresh, redraws on every answer,
// resize and key, and gives the terminal back as it found it.
package tui

import (
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/view"
)

// answer is one answer of the daemon.
type answer struct {
	snap *snapshot.Snapshot
	err  error
	at   time.Time
}

// Loop draws m on scr and redraws it on every answer of the daemon
// (fetch, asked every refresh), every resize and every key, until q,
// Ctrl-C, SIGINT or SIGTERM; it returns the exit status, 0.
func Loop(scr tcell.Screen, m *view.Top, fetch func() (*snapshot.Snapshot, error), refresh time.Duration) int {
	scr.HideCursor()
	stop := make(chan struct{})
	defer close(stop)
	answers := make(chan answer, 1)
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
			case answers <- answer{s, err, time.Now()}:
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

	redraw := func() {
		w, h := scr.Size()
		draw(scr, m.Render(w, h, time.Now()))
	}
	redraw()
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
				if ev.Key() == tcell.KeyRune && m.Key(ev.Rune()) {
					return 0
				}
			}
		case f := <-answers:
			if f.err != nil {
				m.FetchFailed(f.err, f.at)
			} else {
				m.Observe(f.snap)
			}
		case <-clock.C:
		case <-sigs:
			return 0
		}
		redraw()
	}
}

// draw puts lines on the screen, each cleared to its end.
func draw(scr tcell.Screen, lines []view.Line) {
	scr.Clear()
	base := tcell.StyleDefault
	for y, l := range lines {
		st := base
		switch l.Style {
		case view.Title:
			st = base.Reverse(true)
		case view.Heading:
			st = base.Bold(true)
		case view.Alert:
			st = base.Foreground(tcell.ColorRed).Bold(true)
		case view.Dim:
			st = base.Dim(true)
		}
		scr.PutStrStyled(0, y, l.Text, st)
	}
	scr.Show()
}
