package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rivo/uniseg"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// tmuxRig is a private tmux server (its own socket, no config file) with
// one session: a shell in a 120×30 terminal.
type tmuxRig struct {
	t    *testing.T
	sock string
}

const tmuxSession = "ddiskqos-top"

func newTmuxRig(t *testing.T) *tmuxRig {
	t.Helper()
	_, err := exec.LookPath("tmux")
	testkit.Need(t, err == nil, "tmux not installed (apt-get install tmux): %v", err)
	x := &tmuxRig{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	// A plain shell with a known prompt, in a UTF-8 locale (the view
	// draws → and …); TERM is tmux's own.
	x.run("new-session", "-d", "-s", tmuxSession, "-x", "120", "-y", "30",
		"env", "LC_ALL=C.UTF-8", "PS1=$ ", "sh")
	t.Cleanup(func() { exec.Command("tmux", "-S", x.sock, "kill-server").Run() })
	return x
}

func (x *tmuxRig) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-u", "-f", "/dev/null", "-S", x.sock}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// screen is what the pane shows now, one string per line.
func (x *tmuxRig) screen() []string {
	x.t.Helper()
	return strings.Split(strings.TrimRight(x.run("capture-pane", "-p", "-N", "-t", tmuxSession), "\n"), "\n")
}

// pane is a tmux format of the pane (#{alternate_on}, #{pane_width}...).
func (x *tmuxRig) pane(format string) string {
	x.t.Helper()
	return strings.TrimSpace(x.run("display-message", "-p", "-t", tmuxSession, format))
}

// waitScreen waits until ok says yes to the screen and returns it.
func (x *tmuxRig) waitScreen(what string, within time.Duration, ok func(lines []string) bool) []string {
	x.t.Helper()
	deadline := time.Now().Add(within)
	for {
		lines := x.screen()
		if ok(lines) {
			return lines
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("%s: not on screen after %s:\n%s", what, within, strings.Join(lines, "\n"))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func screenHas(lines []string, re *regexp.Regexp) bool {
	for _, l := range lines {
		if re.MatchString(l) {
			return true
		}
	}
	return false
}

// TestRealTopInTmux drives `ddiskqos top` in a real terminal (tmux)
// against the real daemon on real cgroups and a loop device: the
// workloads appear, a demotion shows in the changes pane as it happens,
// the layout follows a resize (SIGWINCH), and q and Ctrl-C quit with exit
// status 0, leaving the alternate screen and showing the cursor again.
func TestRealTopInTmux(t *testing.T) {
	r := newRunRig(t)
	x := newTmuxRig(t)
	small, bulk := r.child(t, "small"), r.child(t, "bulk")
	r.start(t)
	r.waitLevel(t, "small", 1)
	r.waitLevel(t, "bulk", 1)
	r.read(t, small, 1<<20, 0) // some I/O, not enough to leave level 1

	if a := x.pane("#{alternate_on}"); a != "0" {
		t.Fatalf("the shell's pane is on the alternate screen (%q) before top ran", a)
	}
	cmd := fmt.Sprintf("%s top --addr %s --refresh 200ms; echo TOP-EXIT=$?", r.bin, r.addr)
	x.run("send-keys", "-t", tmuxSession, cmd, "Enter")

	row := func(name string) *regexp.Regexp { return regexp.MustCompile(`^` + name + `\s+[1-4]\s`) }
	lines := x.waitScreen("the workload rows", 15*time.Second, func(l []string) bool {
		return screenHas(l, row("small")) && screenHas(l, row("bulk"))
	})
	if a := x.pane("#{alternate_on}"); a != "1" {
		t.Errorf("top runs outside the alternate screen (alternate_on %q)", a)
	}
	devRow := `bfq-weight(\+throttle)?\s+bfq\s` // mechanism, scheduler
	if r.noBFQ {
		devRow = `throttle\s+none\s`
	}
	if !strings.HasPrefix(lines[0], "ddiskqos top  "+r.addr) || !screenHas(lines, regexp.MustCompile(`^health ok; source cgroup`)) ||
		!screenHas(lines, regexp.MustCompile(`^`+r.loop.Name+`\s+7:\d+\s+`+devRow)) {
		t.Errorf("title, health or device missing:\n%s", strings.Join(lines, "\n"))
	}
	checkWidth := func(width int, lines []string) {
		t.Helper()
		var head string
		for i, l := range lines {
			if w := uniseg.StringWidth(strings.TrimRight(l, " ")); w > width {
				t.Errorf("width %d: line %d is %d wide: %q", width, i, w, l)
			}
			if strings.HasPrefix(l, "NAME ") {
				head = l
			}
		}
		// The title bar spans the terminal.
		if w := uniseg.StringWidth(lines[0]); w != width {
			t.Errorf("width %d: title bar %d wide: %q", width, w, lines[0])
		}
		if width >= 120 && !strings.Contains(head, "MECHANISM") {
			t.Errorf("width %d: no MECHANISM column: %q", width, head)
		}
		if width <= 80 && strings.Contains(head, "MECHANISM") {
			t.Errorf("width %d: MECHANISM should have made room: %q", width, head)
		}
	}
	checkWidth(120, lines)

	// A demotion, as it happens: 300 MiB take bulk to level 4.
	r.read(t, bulk, 300<<20, 64<<20)
	demoted := regexp.MustCompile(`→ L[234]\s+demoted\s+bulk\s+after`)
	// The stream also lets the device's throttle measure its capacity,
	// which the device's row shows — at the same refresh as the demotion
	// or a later one (CI once caught the frame in between).
	capacity := regexp.MustCompile(`^` + r.loop.Name + `\s.*\s\d+(\.\d)?[KMG]iB/s \d+ IOPS\s`)
	lines = x.waitScreen("bulk's demotion in the changes pane and the device's capacity on its row", 15*time.Second, func(l []string) bool {
		return screenHas(l, demoted) && screenHas(l, capacity)
	})
	t.Logf("at 120×30:\n%s", strings.Join(lines, "\n"))

	// SIGWINCH: the layout follows the new width.
	x.run("resize-window", "-t", tmuxSession, "-x", "80", "-y", "30")
	if w := x.pane("#{pane_width}"); w != "80" {
		t.Fatalf("pane width %s after resize-window -x 80", w)
	}
	// What ddiskqos does stays at 80 columns: each workload's ACTION,
	// each device's CAPS (the last column: not cut). Until top redraws,
	// tmux shows the 120-column screen cut at 80.
	lines = x.waitScreen("the 80-column layout, ACTION and CAPS in it", 10*time.Second, func(l []string) bool {
		return uniseg.StringWidth(l[0]) == 80 && screenHas(l, regexp.MustCompile(`^NAME\s+LEVEL\s.*\sACTION(\s|$)`)) &&
			!screenHas(l, regexp.MustCompile(`^NAME\s.*MECHANISM`)) && screenHas(l, regexp.MustCompile(`^DEVICE\s.*\sCAPS\s*$`))
	})
	checkWidth(80, lines)
	if !screenHas(lines, row("bulk")) || !screenHas(lines, demoted) {
		t.Errorf("after the resize, rows or changes are gone:\n%s", strings.Join(lines, "\n"))
	}
	t.Logf("at 80×30:\n%s", strings.Join(lines, "\n"))

	// q quits: exit 0, the shell's screen back, the cursor shown.
	quit := func(key string) {
		t.Helper()
		x.run("send-keys", "-t", tmuxSession, key)
		lines := x.waitScreen("the shell after "+key, 10*time.Second, func(l []string) bool {
			return screenHas(l, regexp.MustCompile(`^TOP-EXIT=`))
		})
		if !screenHas(lines, regexp.MustCompile(`^TOP-EXIT=0$`)) {
			t.Errorf("%s: top did not exit 0:\n%s", key, strings.Join(lines, "\n"))
		}
		if a, c := x.pane("#{alternate_on}"), x.pane("#{cursor_flag}"); a != "0" || c != "1" {
			t.Errorf("%s: terminal not restored: alternate_on %s, cursor_flag %s", key, a, c)
		}
		if screenHas(lines, regexp.MustCompile(`^(NAME|LEVEL CHANGES|ddiskqos top)`)) {
			t.Errorf("%s: top's screen left behind on the shell's:\n%s", key, strings.Join(lines, "\n"))
		}
	}
	quit("q")

	// Ctrl-C too (raw mode: a key, not a signal).
	x.run("send-keys", "-t", tmuxSession, "clear; "+cmd, "Enter")
	x.waitScreen("top again", 15*time.Second, func(l []string) bool { return screenHas(l, row("bulk")) })
	quit("C-c")
}
