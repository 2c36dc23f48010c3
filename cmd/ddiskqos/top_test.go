package main

import (
	"strings"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/testkit"
)

// Usage errors exit 2 naming the flag; an unreachable daemon exits 1 on
// the plain terminal, before the screen is taken.
func TestTopErrors(t *testing.T) {
	t.Parallel()
	dead := testkit.FreeAddr(t) // listened on, then closed
	tests := []struct {
		args     []string
		wantCode int
		wantErr  string
	}{
		{[]string{"--sort", "size"}, 2, `--sort "size": want one of name, level, rate`},
		{[]string{"--refresh", "1ms"}, 2, "--refresh 1ms: want at least 50ms"},
		{[]string{"--timeout", "0s"}, 2, "--timeout 0s"},
		{[]string{"--addr", "ftp://x"}, 2, `--addr "ftp://x"`},
		{[]string{"--bogus"}, 2, "-bogus"},
		{[]string{"web"}, 2, `unexpected argument "web"`},
		{[]string{"--addr", dead}, 1, "daemon not reachable at " + dead},
	}
	for _, tt := range tests {
		var out, errOut strings.Builder
		if code := runTop(tt.args, &out, &errOut); code != tt.wantCode || !strings.Contains(errOut.String(), tt.wantErr) || out.Len() != 0 {
			t.Errorf("top %q: exit %d, stdout %q, stderr %q; want exit %d naming %q", tt.args, code, out.String(), errOut.String(), tt.wantCode, tt.wantErr)
		}
	}
}
