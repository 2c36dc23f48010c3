package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/ddiskqos/ddiskqos/internal/snapshot"
)

// hostile are strings a workload's name (or anything else the daemon
// reports) may carry, each with what the table must show instead.
var hostile = []struct{ in, want string }{
	{"\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},         // OSC: set the window title
	{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},               // CSI: clear the screen
	{"a\tb\nc\rd", `a\tb\nc\rd`},                     // table breakers
	{"del\x7f", `del\x7f`},                           // DEL
	{"c1\u009b31m", `c1\u009b31m`},                   // C1 CSI (8-bit)
	{"c1\u0085nel", `c1\u0085nel`},                   // C1 NEL
	{"bad\xff\xfeutf8", `bad\xff\xfeutf8`},           // not UTF-8
	{"rlo\u202eexe.txt", `rlo\u202eexe.txt`},         // bidi override
	{"nul\x00", `nul\x00`},                           //
	{"ls\u2028x", `ls\u2028x`},                       // line separator
	{"plain name_1.2-3", "plain name_1.2-3"},         // unchanged
	{"数据库 café", "数据库 café"},                         // printable non-ASCII stays
	{`system-getty\x2dtty1`, `system-getty\x2dtty1`}, // systemd's own escapes stay
}

func TestStatusCellEscapesControl(t *testing.T) {
	t.Parallel()
	for _, h := range hostile {
		if got := statusCell(h.in); got != h.want {
			t.Errorf("statusCell(%q) = %q, want %q", h.in, got, h.want)
		}
	}
	// Cut to 12 characters, not bytes, then escaped.
	if got := shortID("é\x1b" + strings.Repeat("a", 20)); got != `é\x1baaaaaaaaaa` {
		t.Errorf("shortID = %q", got)
	}
}

// assertTerminalSafe fails when out holds anything a terminal would act
// on: a control character other than newline, a C1 control, DEL, a bidi
// or other format character, or bytes that are not UTF-8.
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: not valid UTF-8", what)
	}
	for i, r := range out {
		if r == '\n' {
			continue
		}
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == '\u2028' || r == '\u2029' {
			t.Errorf("%s: raw %U at byte %d: ...%q...", what, r, i, out[max(0, i-20):min(len(out), i+20)])
		}
	}
}

// TestStatusEscapesEveryColumn renders, through the real API and `status`,
// a snapshot whose every string field is hostile: the output carries none
// of it raw, and each shows escaped.
func TestStatusEscapesEveryColumn(t *testing.T) {
	t.Parallel()
	snap := statusFixture()
	var names []string
	for i, h := range hostile {
		name := h.in + "-w"
		names = append(names, h.want+"-w")
		w := &snapshot.Workload{ID: h.in + "0123456789abcdef", Name: name, Level: 1 + i%4, Weight: 100,
			LabelError: "label " + h.in,
			Applied: []snapshot.Applied{{Device: "dev" + h.in, Dev: "7:" + h.in, Mechanism: "mech" + h.in,
				Error: "err " + h.in}}}
		snap.Workloads = append(snap.Workloads, w)
	}
	snap.Levels = [5]int{}
	for _, w := range snap.Workloads {
		snap.Levels[w.Level]++
	}
	evil := "\x1b]0;pwned\x07\u009b\xff"
	snap.Source, snap.Actuator, snap.CgroupMode = "docker"+evil, "cgroup"+evil, "v2"+evil
	snap.Errors = append(snap.Errors, snapshot.ErrorCount{Cause: "cause" + evil, Count: 1})
	snap.Devices = append(snap.Devices, snapshot.Device{Name: "disk" + evil, Dev: "8:" + evil, Scheduler: "bfq" + evil,
		Mechanism: "bfq-weight" + evil})
	wants := []string{`docker\x1b]0;pwned\x07\u009b\xff`, `cause\x1b]0;pwned\x07\u009b\xff 1`,
		`disk\x1b]0;pwned\x07`, `8:\x1b]0;pwned`, `bfq\x1b]0;pwned`, `label \x1b]0;pwned\x07`,
		`err \x1b]0;pwned\x07`, `dev\x1b]0;pwned\x07:mech\x1b]0;pwned\x07`, `\x1b]0;pwned\x0701 `}
	wants = append(wants, names...)
	check := func(what, out string, wants []string) {
		t.Helper()
		assertTerminalSafe(t, what, out)
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q:\n%s", what, want, out)
			}
		}
	}
	// The renderer on the snapshot as is (bytes that are not UTF-8 included).
	var direct strings.Builder
	writeStatus(&direct, snap, statusOrder(snap.Workloads, "name"), "test", "", statusT0)
	check("writeStatus", direct.String(), wants)
	t.Logf("the window-title workload's row: %s", rowOf(direct.String(), `\x1b]0;pwned\x07-w`))

	// Through the real API and `status`: JSON has turned bytes that are not
	// UTF-8 into U+FFFD (printable, shown as is).
	viaJSON := strings.NewReplacer(`\xff\xfe`, "\ufffd\ufffd", `\xff`, "\ufffd")
	for i := range wants {
		wants[i] = viaJSON.Replace(wants[i])
	}
	addr := statusServer(t, snap)
	for _, args := range [][]string{{"--addr", addr}, {"--addr", addr, "--sort", "rate"}, {"--addr", addr, "--level", "2"}} {
		out, errOut, code := runStatusT(t, statusT0, args...)
		if code != 0 {
			t.Fatalf("status %q: exit %d: %s", args, code, errOut)
		}
		if len(args) == 2 {
			check("status", out, wants)
		} else {
			assertTerminalSafe(t, "status "+strings.Join(args[2:], " "), out)
		}
	}

	// An error body from whatever listens at --addr reaches stderr escaped.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope\x1b]0;pwned\x07\u009b", http.StatusTeapot)
	}))
	defer srv.Close()
	_, errOut, code := runStatusT(t, statusT0, "--addr", srv.Listener.Addr().String())
	if code != 1 {
		t.Errorf("error answer: exit %d", code)
	}
	assertTerminalSafe(t, "stderr", errOut)
	if !strings.Contains(errOut, `nope\x1b]0;pwned\x07\u009b`) {
		t.Errorf("stderr lacks the escaped body: %q", errOut)
	}
}

func rowOf(out, sub string) string {
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}
