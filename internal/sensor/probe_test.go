package sensor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSyncProbe writes for real to a file in a temp dir: writes are
// counted into the histogram, cumulative, and a bad path is an error that
// names it.
func TestSyncProbe(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "probe")
	p, err := NewSyncProbe(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx, 10*time.Millisecond); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := p.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if s.Count >= 3 {
			last := s.Counts[len(s.Counts)-1]
			if s.Sum <= 0 || last > s.Count || s.Path != path {
				t.Fatalf("probe state %+v", s)
			}
			for i := 1; i < len(s.Counts); i++ {
				if s.Counts[i] < s.Counts[i-1] {
					t.Fatalf("counts not cumulative: %v", s.Counts)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d probe writes in 10 s", s.Count)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	if _, err := NewSyncProbe(filepath.Join(t.TempDir(), "no", "such", "dir"), nil); err == nil || !strings.Contains(err.Error(), "no/such/dir") {
		t.Errorf("bad path: %v", err)
	}
}
