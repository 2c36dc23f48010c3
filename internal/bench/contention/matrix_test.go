package contention

import "testing"

// TestBestPeer: the largest share among the peers keeping both victims
// within the limit; with none within it, the least slowed worse victim;
// ddiskqos, no QoS and idle are never peers.
func TestBestPeer(t *testing.T) {
	t.Parallel()
	row := func(c Config, web, light, share float64) HostRow {
		return HostRow{Config: c, WebP99: Spread{Median: web, N: 1}, LightP99: Spread{Median: light, N: 1}, During: Spread{Median: share, N: 1}}
	}
	s := HostSummary{Rows: []HostRow{
		row(Original, 100, 100, 1), row(DDiskQoS, 1, 1, 0.9), row(DDiskQoSCapping, 1, 1, 0.8),
		row("static-2", 1.5, 1.2, 0.02), row("static-10", 2.9, 2, 0.10), row("rearm-10", 2, 3.5, 0.11), row("static-25", 9, 9, 0.25),
	}}
	if p, within, ok := BestPeer(s, 3); !ok || !within || p.Config != "static-10" {
		t.Errorf("best peer %s (within %v, ok %v), want static-10", p.Config, within, ok)
	}
	s.Rows = []HostRow{row(Original, 100, 100, 1), row("static-5", 4, 6, 0.05), row("rearm-5", 5, 4, 0.05), row("static-25", 9, 9, 0.25)}
	if p, within, ok := BestPeer(s, 3); !ok || within || p.Config != "rearm-5" {
		t.Errorf("none within: best peer %s (within %v, ok %v), want rearm-5 (worse victim 5x)", p.Config, within, ok)
	}
	s.Rows = []HostRow{row(Original, 1, 1, 1), row(DDiskQoS, 1, 1, 1)}
	if p, _, ok := BestPeer(s, 3); ok {
		t.Errorf("no peer: got %s", p.Config)
	}
}
