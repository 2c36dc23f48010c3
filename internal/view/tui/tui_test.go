package tui

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
	"github.com/ddiskqos/ddiskqos/internal/view"
	"github.com/ddiskqos/ddiskqos/internal/view/viewtest"
)

// simText is the simulated screen's text, one string per line.
func simText(s tcell.SimulationScreen) []string {
	cells, w, h := s.GetContents()
	lines := make([]string, h)
	for y := range h {
		var b strings.Builder
		for x := range w {
			b.Write(cells[y*w+x].Bytes)
		}
		lines[y] = strings.TrimRight(b.String(), " ")
	}
	return lines
}

// capScreen keeps a copy of what each Show put on the simulated screen,
// taken in the loop's goroutine: GetContents hands out the screen's own
// cells, which the next draw overwrites.
type capScreen struct {
	tcell.SimulationScreen
	mu    sync.Mutex
	lines []string
}

func (c *capScreen) Show() {
	c.SimulationScreen.Show()
	l := simText(c.SimulationScreen)
	c.mu.Lock()
	c.lines = l
	c.mu.Unlock()
}

func (c *capScreen) shown() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

// The terminal loop on tcell's simulated screen (the real terminal is
// cmd/ddiskqos's TestRealTopInTmux's): it draws the model, follows a
// resize and a sort key, takes a fresh answer, and returns 0 on q and on
// Ctrl-C.
func TestTopLoop(t *testing.T) {
	t.Parallel()
	for _, quit := range []*tcell.EventKey{tcell.NewEventKey(tcell.KeyRune, 'q', 0), tcell.NewEventKey(tcell.KeyCtrlC, 0, 0)} {
		scr := &capScreen{SimulationScreen: tcell.NewSimulationScreen("UTF-8")}
		if err := scr.Init(); err != nil {
			t.Fatal(err)
		}
		scr.SetSize(120, 30)
		s1 := viewtest.Fixture()
		m := view.NewTop("ADDR", "rate")
		m.Observe(s1)
		answers := make(chan *snapshot.Snapshot, 1)
		answers <- viewtest.After(s1, func(s *snapshot.Snapshot) { viewtest.Find(s, "web-1").Level = 4 })
		last := s1 // the fetcher's own: m is the loop's
		fetch := func() (*snapshot.Snapshot, error) {
			select {
			case s := <-answers:
				last = s
			default:
				last = viewtest.After(last, nil)
			}
			return last, nil
		}
		done := make(chan int, 1)
		go func() { done <- Loop(scr, m, fetch, 50*time.Millisecond) }()
		wait := func(what string, ok func([]string) bool) {
			t.Helper()
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				if lines := scr.shown(); len(lines) > 0 && ok(lines) {
					return
				} else if time.Now().After(deadline) {
					t.Fatalf("%s: not on the screen:\n%s", what, strings.Join(lines, "\n"))
				}
			}
		}
		// has: a line starts with prefix and contains every of also.
		has := func(lines []string, prefix string, also ...string) bool {
			for _, l := range lines {
				if strings.HasPrefix(l, prefix) {
					ok := true
					for _, a := range also {
						ok = ok && strings.Contains(l, a)
					}
					if ok {
						return true
					}
				}
			}
			return false
		}
		wait("the demotion", func(l []string) bool {
			return strings.HasPrefix(l[0], "ddiskqos top  ADDR") && has(l, "LEVEL CHANGES (1 seen")
		})
		scr.SetSize(70, 20)
		scr.PostEventWait(tcell.NewEventResize(70, 20))
		wait("the 70-column layout", func(l []string) bool {
			return len(l) == 20 && has(l, "NAME   ") && !has(l, "NAME   ", "MECHANISM")
		})
		scr.PostEventWait(tcell.NewEventKey(tcell.KeyRune, 'n', 0))
		wait("sorted by name", func(l []string) bool { return strings.Contains(l[0], "sort: name") })
		scr.PostEventWait(quit)
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("%s: exit %d", quit.Name(), code)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not quit", quit.Name())
		}
		scr.Fini()
	}
}
