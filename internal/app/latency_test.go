package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestRequestless: the devices whose I/O no block-request tracepoint
// shows are those with a size, no request queue (mq) and nothing below
// them; with one, the polling backstop is not stretched.
func TestRequestless(t *testing.T) {
	t.Parallel()
	sys := t.TempDir()
	dev := func(name, size string, dirs ...string) {
		t.Helper()
		d := filepath.Join(sys, "block", name)
		for _, sub := range append([]string{"slaves"}, dirs...) {
			if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(d, "size"), []byte(size+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dev("sda", "1000", "mq")
	dev("loop0", "0", "mq")
	dev("zram0", "0")                   // unconfigured: no I/O
	dev("dm-0", "1000", "slaves/sda")   // stacked: its disk's requests
	dev("nvme0n1", "1000", "multipath") // a multipath head: its paths' requests
	log := slog.New(slog.DiscardHandler)
	if got := requestless(sys); len(got) != 0 {
		t.Fatalf("requestless %q, want none", got)
	}
	if got := activeQuietMax(sys, log); got != 0 {
		t.Errorf("active quiet max %v, want 0 (the default)", got)
	}
	dev("zram1", "4096")
	dev("pmem0", "4096")
	if got := requestless(sys); !slices.Equal(got, []string{"pmem0", "zram1"}) {
		t.Fatalf("requestless %q, want pmem0 and zram1", got)
	}
	if got := activeQuietMax(sys, log); got >= 0 {
		t.Errorf("active quiet max %v, want negative (not stretched)", got)
	}
}
