package snapshot

import "testing"

// TestErrorCauses: every cause has its own word, so the daemon's counts
// and the metrics' labels cannot collide; a value outside the list is
// "unknown", never a declared word.
func TestErrorCauses(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, c := range ErrorCauses() {
		s := c.String()
		if s == "" || s == "unknown" || seen[s] {
			t.Errorf("cause %d: word %q empty, unknown or repeated", c, s)
		}
		seen[s] = true
	}
	if len(seen) != int(NumErrorCauses) {
		t.Errorf("%d causes listed, want %d", len(seen), NumErrorCauses)
	}
	if s := NumErrorCauses.String(); s != "unknown" {
		t.Errorf("out-of-range cause: %q, want unknown", s)
	}
}
