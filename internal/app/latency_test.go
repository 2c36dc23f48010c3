package app

import (
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ddiskqos/ddiskqos/internal/config"
	"github.com/ddiskqos/ddiskqos/internal/host"
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

// TestLatencyOptionsOff: latency: off gives the daemon no sensor to open
// (so no BPF is loaded) and tells it the stage is off; auto, the default,
// gives it the eBPF sensor.
func TestLatencyOptionsOff(t *testing.T) {
	t.Parallel()
	roots := host.Roots{Sys: "/nonexistent/sys", Proc: "/nonexistent/proc"}
	off := latencyOptions(config.LatencyModeOff, roots)
	if !off.Off || off.Open != nil {
		t.Errorf("latency off: Off %v, Open set %v; want off and nothing to open", off.Off, off.Open != nil)
	}
	auto := latencyOptions(config.Default().Latency, roots)
	if auto.Off || auto.Open == nil || auto.SysRoot != roots.Sys {
		t.Errorf("latency auto (the default): Off %v, Open set %v, SysRoot %q; want the sensor", auto.Off, auto.Open != nil, auto.SysRoot)
	}
}
