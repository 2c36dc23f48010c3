package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/view/viewtest"
)

// TestStatusEscapesThroughAPI renders, through the real API and `status`,
// a snapshot whose every string field is hostile: the output carries none
// of it raw, and each shows escaped (internal/view tests the renderer on
// the snapshot as is; JSON has turned bytes that are not UTF-8 into
// U+FFFD, printable, shown as is). An error body from whatever listens at
// --addr reaches stderr escaped.
func TestStatusEscapesThroughAPI(t *testing.T) {
	t.Parallel()
	snap, wants := viewtest.HostileFixture()
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
		viewtest.AssertTerminalSafe(t, "status "+strings.Join(args[2:], " "), out)
		if len(args) > 2 {
			continue
		}
		for _, want := range wants {
			if !strings.Contains(out, want) {
				t.Errorf("status lacks %q:\n%s", want, out)
			}
		}
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope\x1b]0;pwned\x07\u009b", http.StatusTeapot)
	}))
	defer srv.Close()
	_, errOut, code := runStatusT(t, statusT0, "--addr", srv.Listener.Addr().String())
	if code != 1 {
		t.Errorf("error answer: exit %d", code)
	}
	viewtest.AssertTerminalSafe(t, "stderr", errOut)
	if !strings.Contains(errOut, `nope\x1b]0;pwned\x07\u009b`) {
		t.Errorf("stderr lacks the escaped body: %q", errOut)
	}
}
