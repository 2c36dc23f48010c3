package workload

import (
	"strings"
	"testing"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"50MB/s": 50e6, "50MB": 50e6, "1k/s": 1024, "7": 7} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := parseRate("fast/s"); err == nil || !strings.Contains(err.Error(), `"fast/s"`) {
		t.Errorf("parseRate(fast/s) error %v; want one naming the input", err)
	}
}

func TestHumanBytes(t *testing.T) {
	t.Parallel()
	for in, want := range map[float64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 20: "3.0 MiB", 1.5 * (1 << 30): "1.5 GiB"} {
		if got := humanBytes(in); got != want {
			t.Errorf("humanBytes(%v) = %q; want %q", in, got, want)
		}
	}
}
