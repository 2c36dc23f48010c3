package app

import (
	"runtime/debug"
	"testing"
)

// TestSetGCPercent: the daemon's default when GOGC is not set, the
// operator's GOGC left alone when it is.
func TestSetGCPercent(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })
	for _, c := range []struct {
		env      string
		want     string
		operator bool
		inForce  int
	}{
		{env: "", want: "50", inForce: DefaultGCPercent},
		{env: "200", want: "200", operator: true, inForce: 100}, // the runtime's, untouched
		{env: "off", want: "off", operator: true, inForce: 100},
	} {
		t.Run(c.env, func(t *testing.T) {
			debug.SetGCPercent(100)
			got, operator := SetGCPercent(func(k string) string {
				if k == "GOGC" {
					return c.env
				}
				return ""
			})
			if got != c.want || operator != c.operator {
				t.Errorf("GOGC %q: got %q, operator %v; want %q, %v", c.env, got, operator, c.want, c.operator)
			}
			if p := debug.SetGCPercent(100); p != c.inForce {
				t.Errorf("GOGC %q: percent in force %d, want %d", c.env, p, c.inForce)
			}
		})
	}
}
